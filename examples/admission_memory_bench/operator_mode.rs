//! The full operator as the server: `cftunnel run` against a local control plane (etcd,
//! kube-apiserver, kube-controller-manager) and the Cloudflare simulator, its webhooks
//! registered, a world of TunnelBindings applied through them, so the reviews are judged with
//! the admission view of a running operator (its caches, the hostnames the world claims).
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use cftunnel_sim::{RunningSim, SimConfig, Simulator};
use cftunnel_testenv::{ControlPlane, ControlPlaneOptions};

use crate::operator::{Operator, OperatorOptions, free_loopback_port, wait_listening};

const TOKEN: &str = "bench-api-token";
/// Hostnames each TunnelBinding of the world routes.
const SUBJECTS_PER_BINDING: usize = 10;

/// The plane, the simulator and where the operator serves; one operator process at a time.
pub struct OperatorEnv {
    plane: ControlPlane,
    _sim: Simulator,
    cloudflare: RunningSim,
    binary: PathBuf,
    webhook: std::net::SocketAddr,
}

impl OperatorEnv {
    /// Starts the plane and the simulator, then an operator that registers the webhooks and
    /// sees `world` TunnelBindings applied through them (it is stopped again: each scenario
    /// gets a fresh process over the same cluster).
    pub async fn start(binary: &Path, world: usize) -> anyhow::Result<OperatorEnv> {
        let plane = ControlPlane::start(ControlPlaneOptions::for_cftunnel()).await?;
        let sim = Simulator::new(SimConfig {
            account_name: "Bench Account".into(),
            zones: vec!["example.com".into()],
            tokens: vec![TOKEN.into()],
            ..Default::default()
        });
        let cloudflare = sim.serve("127.0.0.1:0".parse()?).await?;
        let env = OperatorEnv {
            plane,
            _sim: sim,
            cloudflare,
            binary: binary.to_path_buf(),
            webhook: free_loopback_port()?,
        };
        let mut operator = env.operator().await?;
        cftunnel_testenv::registration::register_webhook(&env.plane, env.webhook, None).await?;
        env.apply_world(world)?;
        operator.check()?;
        operator.stop()?;
        Ok(env)
    }

    /// The CA the operator's serving certificate is issued by.
    pub fn ca_pem(&self) -> &str {
        self.plane.ca().cert_pem()
    }

    pub fn base_url(&self) -> String {
        format!("https://{}", self.webhook)
    }

    /// A fresh `cftunnel run`, once its webhook listens.
    pub async fn operator(&self) -> anyhow::Result<Operator> {
        let options = OperatorOptions {
            log_dir: None,
            log_filter: "warn",
            cloudflare_budget: None,
            under: None,
        };
        let operator = Operator::start(
            &self.plane,
            &self.binary,
            &self.cloudflare.url,
            self.webhook,
            &options,
        )?;
        wait_listening(self.webhook).await?;
        Ok(operator)
    }

    /// Waits until the operator's caches have listed: a normal review is allowed.
    pub async fn wait_ready(&self, client: &reqwest::Client, body: Vec<u8>) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(180);
        let url = format!("{}/validate", self.base_url());
        loop {
            let answer = client
                .post(&url)
                .header("content-type", "application/json")
                .body(body.clone())
                .send()
                .await;
            if let Ok(answer) = answer {
                let text = answer.text().await.unwrap_or_default();
                if text.contains(r#""allowed":true"#) {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                bail!("the operator's webhook never allowed a normal review");
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// The ClusterTunnel the reviews name, its Secret, and `bindings` TunnelBindings of
    /// [`SUBJECTS_PER_BINDING`] hostnames each in the namespace `shop`, applied with kubectl
    /// through the registered webhooks.
    fn apply_world(&self, bindings: usize) -> anyhow::Result<()> {
        let mut manifest = String::from(WORLD_HEAD);
        for b in 0..bindings {
            manifest.push_str(&format!(
                "---\napiVersion: networking.cfargotunnel.com/v1alpha1\nkind: TunnelBinding\n\
                 metadata: {{name: w{b}, namespace: shop}}\n\
                 tunnelRef: {{kind: ClusterTunnel, name: edge}}\nsubjects:\n"
            ));
            for s in 0..SUBJECTS_PER_BINDING {
                manifest.push_str(&format!(
                    "  - {{name: web, spec: {{fqdn: w{b}-{s}.example.com, path: '^/a{s}(/|$)'}}}}\n"
                ));
            }
        }
        let path = self.plane.dir().join("bench-world.yaml");
        std::fs::write(&path, manifest)?;
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            // The webhook refuses with "not ready" until its caches have listed.
            let out = self
                .plane
                .kubectl()
                .args(["apply", "--server-side", "-f"])
                .arg(&path)
                .output()
                .context("kubectl apply")?;
            if out.status.success() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "applying the world failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            std::thread::sleep(Duration::from_secs(2));
        }
    }

    pub async fn stop(self) {
        self.cloudflare.shutdown().await;
        self.plane.stop().await;
    }
}

const WORLD_HEAD: &str = "apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: Namespace
metadata: {name: cftunnel-tunnels}
---
apiVersion: v1
kind: Secret
metadata: {name: cloudflare-secrets, namespace: cftunnel-tunnels}
stringData: {CLOUDFLARE_API_TOKEN: bench-api-token}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  ports: [{name: http, port: 80}]
---
apiVersion: networking.cfargotunnel.com/v1alpha1
kind: ClusterTunnel
metadata: {name: edge}
spec:
  newTunnel: {name: edge}
  cloudflare: {domain: example.com, secret: cloudflare-secrets, accountName: Bench Account}
";
