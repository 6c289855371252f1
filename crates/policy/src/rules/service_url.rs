//! Which strings cloudflared accepts as an ingress `service` (its own validation, mirrored so
//! that a bad target is refused at apply time instead of crash-looping cloudflared).

/// Why `service` is not a valid cloudflared ingress service, if it is not.
pub(crate) fn service_problem(service: &str) -> Option<String> {
    if service.is_empty() {
        return Some("must not be empty".into());
    }
    if let Some(code) = service.strip_prefix("http_status:") {
        return match code.parse::<u16>() {
            Ok(c) if (100..=999).contains(&c) => None,
            _ => Some(format!(
                "{service:?} has an invalid status code; use http_status:NNN with NNN from 100 to 999"
            )),
        };
    }
    if matches!(
        service,
        "hello_world" | "hello-world" | "bastion" | "socks-proxy"
    ) {
        return None;
    }
    if let Some(path) = service
        .strip_prefix("unix:")
        .or_else(|| service.strip_prefix("unix+tls:"))
    {
        return (path.is_empty() || !path.starts_with('/')).then(|| {
            format!("{service:?} needs an absolute socket path, e.g. unix:/run/app.sock")
        });
    }
    let Ok(url) = url::Url::parse(service) else {
        return Some(format!(
            "{service:?} is not a URL; use e.g. http://web.default.svc:80, tcp://db:5432 or http_status:404"
        ));
    };
    if url.host_str().is_none_or(str::is_empty) {
        return Some(format!(
            "{service:?} has no host; use <scheme>://<host>:<port>"
        ));
    }
    match url.scheme() {
        "http" | "https" | "ws" | "wss" => {
            let has_path = url.path() != "/" && !url.path().is_empty();
            if has_path || url.query().is_some() || url.fragment().is_some() {
                Some(format!(
                    "{service:?} has a path; cloudflared proxies http(s) services only as <scheme>://<host>:<port>, route paths with the path field instead"
                ))
            } else {
                None
            }
        }
        "tcp" | "ssh" | "rdp" | "smb" => None,
        other => Some(format!(
            "{service:?} has unsupported scheme {other:?}; use http, https, ws, wss, tcp, ssh, rdp, smb, unix, unix+tls or http_status"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::service_problem;

    #[test]
    fn accepts_what_cloudflared_accepts() {
        for ok in [
            "http_status:404",
            "http://web.default.svc:80",
            "https://web.default.svc",
            "http://web.default.svc/",
            "tcp://db:5432",
            "ssh://host:22",
            "unix:/run/app.sock",
            "hello_world",
        ] {
            assert_eq!(service_problem(ok), None, "{ok}");
        }
    }

    #[test]
    fn refuses_paths_bad_codes_and_unknown_schemes() {
        assert!(service_problem("http://web/api").is_some_and(|m| m.contains("has a path")));
        assert!(
            service_problem("http_status:42").is_some_and(|m| m.contains("invalid status code"))
        );
        assert!(
            service_problem("ftp://x").is_some_and(|m| m.contains("unsupported scheme \"ftp\""))
        );
        assert!(service_problem("web:80").is_some());
        assert!(service_problem("").is_some());
    }
}
