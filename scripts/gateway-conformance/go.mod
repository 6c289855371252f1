module cftunnel/scripts/gateway-conformance

go 1.22
