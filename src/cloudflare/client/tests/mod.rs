//! Behaviour tests of the client against small in-process fake servers.
