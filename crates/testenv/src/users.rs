//! Client identities: kubeconfig files for kubectl and `kube::Config` values for Rust clients.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::TestEnvError;

/// Where a user's credentials live on disk and how to reach the API server with them.
#[derive(Debug, Clone)]
pub struct Credentials {
    pub server: http::Uri,
    pub ca_cert: PathBuf,
    pub ca_der: Vec<u8>,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

impl Credentials {
    /// A fresh client configuration; build one `kube::Client` per tokio runtime from it.
    pub fn config(&self) -> kube::Config {
        let mut config = kube::Config::new(self.server.clone());
        config.root_cert = Some(vec![self.ca_der.clone()]);
        config.auth_info.client_certificate = Some(self.client_cert.display().to_string());
        config.auth_info.client_key = Some(self.client_key.display().to_string());
        config
    }
}

/// Renders a single-context kubeconfig (JSON, which kubectl reads as YAML) referencing files.
pub fn render_kubeconfig(user: &str, credentials: &Credentials) -> String {
    let document = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{
            "name": "cftunnel-local",
            "cluster": {
                "server": credentials.server.to_string().trim_end_matches('/'),
                "certificate-authority": credentials.ca_cert.display().to_string(),
            }
        }],
        "users": [{
            "name": user,
            "user": {
                "client-certificate": credentials.client_cert.display().to_string(),
                "client-key": credentials.client_key.display().to_string(),
            }
        }],
        "contexts": [{
            "name": "cftunnel-local",
            "context": { "cluster": "cftunnel-local", "user": user }
        }],
        "current-context": "cftunnel-local",
    });
    format!("{document:#}\n")
}

/// Writes a user's key pair and kubeconfig under `dir` and returns the credentials.
pub(crate) fn write_user_files(
    dir: &Path,
    file_stem: &str,
    user: &str,
    server: &str,
    ca_cert: &Path,
    ca_der: &[u8],
    issued: &super::IssuedCert,
) -> Result<(Credentials, PathBuf), TestEnvError> {
    let client_cert = dir.join(format!("{file_stem}.crt"));
    let client_key = dir.join(format!("{file_stem}.key"));
    let kubeconfig = dir.join(format!("{file_stem}.kubeconfig"));
    write(&client_cert, issued.cert_pem.as_bytes())?;
    write(&client_key, issued.key_pem.as_bytes())?;
    let server = server
        .parse::<http::Uri>()
        .map_err(|e| TestEnvError::io("parsing the API server URL", std::io::Error::other(e)))?;
    let credentials = Credentials {
        server,
        ca_cert: ca_cert.to_path_buf(),
        ca_der: ca_der.to_vec(),
        client_cert,
        client_key,
    };
    write(
        &kubeconfig,
        render_kubeconfig(user, &credentials).as_bytes(),
    )?;
    Ok((credentials, kubeconfig))
}

/// Writes a file readable only by its owner (keys live next to certificates).
pub fn write(path: &Path, contents: &[u8]) -> Result<(), TestEnvError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| TestEnvError::io(format!("writing {}", path.display()), e))?;
    file.write_all(contents)
        .map_err(|e| TestEnvError::io(format!("writing {}", path.display()), e))
}

/// A minted non-admin identity: a client certificate with CN = name and O = groups.
#[derive(Debug, Clone)]
pub struct TestUser {
    pub name: String,
    pub groups: Vec<String>,
    kubeconfig: PathBuf,
    credentials: Credentials,
}

impl TestUser {
    pub(crate) fn new(
        name: &str,
        groups: &[&str],
        kubeconfig: PathBuf,
        credentials: Credentials,
    ) -> TestUser {
        TestUser {
            name: name.to_string(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            kubeconfig,
            credentials,
        }
    }

    /// The kubeconfig file, for kubectl.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// A fresh client configuration for this user.
    pub fn config(&self) -> kube::Config {
        self.credentials.config()
    }

    /// A client for this user, bound to the current tokio runtime.
    pub fn client(&self) -> Result<kube::Client, TestEnvError> {
        super::install_crypto_provider();
        kube::Client::try_from(self.config())
            .map_err(|e| TestEnvError::kube("building a client", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credentials() -> Credentials {
        Credentials {
            server: http::Uri::from_static("https://127.0.0.1:6443"),
            ca_cert: PathBuf::from("/d/ca.crt"),
            ca_der: vec![1, 2, 3],
            client_cert: PathBuf::from("/d/admin.crt"),
            client_key: PathBuf::from("/d/admin.key"),
        }
    }

    #[test]
    fn kubeconfig_names_server_ca_and_client_files() {
        let text = render_kubeconfig("admin", &credentials());
        let parsed = kube::config::Kubeconfig::from_yaml(&text).expect("kubeconfig parses");
        assert_eq!(parsed.current_context.as_deref(), Some("cftunnel-local"));
        let cluster = parsed.clusters[0].cluster.as_ref().expect("cluster");
        assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:6443"));
        assert_eq!(cluster.certificate_authority.as_deref(), Some("/d/ca.crt"));
        assert_eq!(parsed.auth_infos[0].name, "admin");
        let user = parsed.auth_infos[0].auth_info.as_ref().expect("user");
        assert_eq!(user.client_certificate.as_deref(), Some("/d/admin.crt"));
        assert_eq!(user.client_key.as_deref(), Some("/d/admin.key"));
        let context = parsed.contexts[0].context.as_ref().expect("context");
        assert_eq!(context.cluster, "cftunnel-local");
        assert_eq!(context.user.as_deref(), Some("admin"));
    }

    #[test]
    fn config_matches_the_kubeconfig() {
        let config = credentials().config();
        assert_eq!(config.cluster_url.to_string(), "https://127.0.0.1:6443/");
        assert_eq!(config.root_cert, Some(vec![vec![1, 2, 3]]));
        assert_eq!(
            config.auth_info.client_certificate.as_deref(),
            Some("/d/admin.crt")
        );
        assert_eq!(config.auth_info.client_key.as_deref(), Some("/d/admin.key"));
        assert!(!config.accept_invalid_certs);
    }
}
