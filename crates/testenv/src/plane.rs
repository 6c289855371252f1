//! The control plane as one value: start-up order, client identities, namespaces and shutdown.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};

use super::binaries::Binaries;
use super::certs::{IssuedCert, TestCa, generate_key_pair_pem};
use super::free_port;
use super::node::{self, Node, NodeOptions};
use super::process::{ManagedProcess, PORT_ATTEMPTS, port_was_taken, while_port_taken};
use super::supervisor::Watchdog;
use super::users::{Credentials, TestUser, write, write_user_files};
use super::{TestEnvError, apiserver, controller_manager, etcd, install_crypto_provider, webhook};

/// CRDs normally become Established within a second or two.
const CRD_TIMEOUT: Duration = Duration::from_secs(60);

/// What to run besides etcd and kube-apiserver.
#[derive(Debug, Clone, Default)]
pub struct ControlPlaneOptions {
    /// Run kube-controller-manager (Deployments, ReplicaSets, garbage collection, namespaces).
    pub controller_manager: bool,
    /// Applied and waited `Established` before kube-controller-manager starts, so GC sees them at once.
    pub crds: Vec<CustomResourceDefinition>,
    /// Appended to kube-apiserver's flags, e.g. `--enable-admission-plugins=OwnerReferencesPermissionEnforcement`.
    pub extra_apiserver_args: Vec<String>,
    /// Run a real node (containerd, kubelet, kube-scheduler; implies the controller manager).
    /// Only inside the private namespaces of `node::rerun_in_private_namespaces`.
    pub node: Option<NodeOptions>,
    /// The port kube-apiserver is tried on first (normally a free one is picked). While a port
    /// is taken, kube-apiserver starts again on a fresh one.
    pub apiserver_port: Option<u16>,
}

impl ControlPlaneOptions {
    /// kube-controller-manager and cftunnel's CRDs (conversion pointing at the default webhook
    /// Service): the cluster `cftunnel run` expects.
    pub fn for_cftunnel() -> Self {
        ControlPlaneOptions {
            controller_manager: true,
            crds: cftunnel_types::crds::all(&cftunnel_types::crds::ConversionService::default()),
            ..ControlPlaneOptions::default()
        }
    }
}

/// A running local control plane; stopped by [`ControlPlane::stop`], on drop, or by its watchdog.
#[derive(Debug)]
pub struct ControlPlane {
    dir: PathBuf,
    binaries: Binaries,
    ca: TestCa,
    ca_cert: PathBuf,
    server: String,
    etcd_url: String,
    admin: Credentials,
    admin_kubeconfig: PathBuf,
    /// In start order; stopped in reverse (KCM, then kube-apiserver, then etcd).
    processes: Vec<ManagedProcess>,
    watchdog: Option<Watchdog>,
    startup: Duration,
    next_user: AtomicU64,
    node: Option<Node>,
    /// What kube-apiserver was started with, so an outage can end on the same port.
    apiserver: Option<ApiServerLaunch>,
}

/// How kube-apiserver was started.
#[derive(Debug, Clone)]
struct ApiServerLaunch {
    files: apiserver::ApiServerFiles,
    port: u16,
    extra: Vec<String>,
}

impl ControlPlane {
    /// Starts etcd, kube-apiserver, the CRDs and optionally kube-controller-manager, each waited ready.
    pub async fn start(options: ControlPlaneOptions) -> Result<ControlPlane, TestEnvError> {
        let began = Instant::now();
        install_crypto_provider();
        let binaries = Binaries::locate()?;
        let with_node = options.node.is_some();
        binaries.require(options.controller_manager || with_node, with_node)?;
        if with_node {
            node::namespace::require_private()?;
        }

        let dir = tempfile::Builder::new()
            .prefix("cftunnel-cp-")
            .tempdir()
            .map_err(|e| TestEnvError::io("creating the control-plane directory", e))?
            .keep();
        // From here on, an early return drops `plane`, which stops whatever already runs.
        let watchdog = match Watchdog::start(&dir) {
            Ok(watchdog) => watchdog,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        let ca = TestCa::new("cftunnel-local-ca")?;
        let ca_cert = dir.join("ca.crt");
        let port = match options.apiserver_port {
            Some(port) => port,
            None => free_port()?,
        };
        let server = format!("https://127.0.0.1:{port}");
        let issued_admin = ca.issue_client_cert("admin", &["system:masters"])?;
        let (admin, admin_kubeconfig) = write_user_files(
            &dir,
            "admin",
            "admin",
            &server,
            &ca_cert,
            ca.cert_der(),
            &issued_admin,
        )?;
        let mut plane = ControlPlane {
            dir: dir.clone(),
            binaries,
            ca,
            ca_cert,
            server,
            etcd_url: String::new(),
            admin,
            admin_kubeconfig,
            processes: Vec::new(),
            watchdog: Some(watchdog),
            startup: Duration::ZERO,
            next_user: AtomicU64::new(0),
            node: None,
            apiserver: None,
        };
        let node_dirs = match with_node {
            true => Some(node::prepare(&dir)?),
            false => None,
        };
        write(&plane.ca_cert, plane.ca.cert_pem().as_bytes())?;
        let mut hosts = vec!["127.0.0.1", "localhost"];
        let node_flags = match with_node {
            true => {
                hosts.extend(node::APISERVER_HOSTS);
                Some(node::apiserver_flags(&dir, &plane.ca, &plane.ca_cert)?)
            }
            false => None,
        };
        let files = apiserver::ApiServerFiles {
            ca_cert: plane.ca_cert.clone(),
            serving_cert: dir.join("apiserver.crt"),
            serving_key: dir.join("apiserver.key"),
            service_account_key: dir.join("sa.key"),
            service_account_public_key: dir.join("sa.pub"),
            cert_dir: dir.join("apiserver-certs"),
            node_flags,
        };
        let serving = plane.ca.issue_server_cert(&hosts)?;
        write(&files.serving_cert, serving.cert_pem.as_bytes())?;
        write(&files.serving_key, serving.key_pem.as_bytes())?;
        let (sa_private, sa_public) = generate_key_pair_pem()?;
        write(&files.service_account_key, sa_private.as_bytes())?;
        write(&files.service_account_public_key, sa_public.as_bytes())?;

        let etcd = etcd::start(&plane.binaries.etcd, &dir).await?;
        let etcd_url = etcd.client_url.clone();
        plane.etcd_url = etcd_url.clone();
        plane.processes.push(etcd.process);

        // The port was free when picked; another test's socket may have taken it since. Then
        // kube-apiserver exits with `address already in use` (CI saw it) and starts again on a
        // fresh port, the admin's kubeconfig rewritten to name it.
        let mut port = port;
        let mut attempt = 1;
        let process = loop {
            let client = plane.admin_client()?;
            let started = apiserver::start(
                &plane.binaries.apiserver,
                &dir,
                &files,
                &etcd_url,
                port,
                &options.extra_apiserver_args,
                client,
            )
            .await;
            match started {
                Err(e) if attempt < PORT_ATTEMPTS && port_was_taken(&e) => {
                    attempt += 1;
                    port = free_port()?;
                    plane.use_port(port, &issued_admin)?;
                }
                other => break other?,
            }
        };
        plane.processes.push(process);
        let admin_client = plane.admin_client()?;
        plane.apiserver = Some(ApiServerLaunch {
            files: files.clone(),
            port,
            extra: options.extra_apiserver_args.clone(),
        });

        for crd in &options.crds {
            apply_crd(&admin_client, crd).await?;
        }

        if options.controller_manager || with_node {
            // system:masters: bootstrap RBAC for the KCM user alone does not cover GC's deletes.
            let issued = plane
                .ca
                .issue_client_cert("system:kube-controller-manager", &["system:masters"])?;
            let (_, kubeconfig) = write_user_files(
                &dir,
                "controller-manager",
                "system:kube-controller-manager",
                &plane.server,
                &plane.ca_cert,
                plane.ca.cert_der(),
                &issued,
            )?;
            let root_ca = with_node.then_some(plane.ca_cert.as_path());
            let process = controller_manager::start(
                &plane.binaries.controller_manager,
                &dir,
                &kubeconfig,
                root_ca,
            )
            .await?;
            plane.processes.push(process);
        }
        if let (Some(options), Some((node_dir, cgroup_root))) = (&options.node, &node_dirs) {
            let ctx = node::NodeStart {
                plane_dir: &dir,
                binaries: &plane.binaries,
                ca: &plane.ca,
                ca_cert: &plane.ca_cert,
                server: &plane.server,
                apiserver_port: port,
                client: admin_client.clone(),
            };
            let mut processes = std::mem::take(&mut plane.processes);
            let started = node::start(ctx, options, node_dir, cgroup_root, &mut processes).await;
            plane.processes = processes;
            plane.node = Some(started?);
        }
        plane.startup = began.elapsed();
        Ok(plane)
    }

    /// Names `https://127.0.0.1:<port>` as the API server, in the admin's kubeconfig too.
    fn use_port(&mut self, port: u16, issued_admin: &IssuedCert) -> Result<(), TestEnvError> {
        self.server = format!("https://127.0.0.1:{port}");
        let (admin, kubeconfig) = write_user_files(
            &self.dir,
            "admin",
            "admin",
            &self.server,
            &self.ca_cert,
            self.ca.cert_der(),
            issued_admin,
        )?;
        self.admin = admin;
        self.admin_kubeconfig = kubeconfig;
        Ok(())
    }

    /// A fresh admin (`system:masters`) configuration; build one client per tokio runtime.
    pub fn admin_config(&self) -> kube::Config {
        self.admin.config()
    }

    /// An admin client bound to the current tokio runtime.
    pub fn admin_client(&self) -> Result<kube::Client, TestEnvError> {
        install_crypto_provider();
        kube::Client::try_from(self.admin_config())
            .map_err(|e| TestEnvError::kube("building the admin client", e))
    }

    /// The admin kubeconfig file, for the real kubectl.
    pub fn admin_kubeconfig(&self) -> &Path {
        &self.admin_kubeconfig
    }

    /// etcd's plain-HTTP client URL, for tests that check what the API server stored.
    pub fn etcd_url(&self) -> &str {
        &self.etcd_url
    }

    /// The helm binary built beside kubectl (`scripts/build-control-plane.sh`).
    pub fn helm(&self) -> Command {
        Command::new(&self.binaries.helm)
    }

    /// The API server URL (`https://127.0.0.1:<port>`).
    pub fn server_url(&self) -> &str {
        &self.server
    }

    /// Mints a user whose client certificate has CN = `name` and O = `groups` (at most two).
    pub fn user(&self, name: &str, groups: &[&str]) -> Result<TestUser, TestEnvError> {
        install_crypto_provider();
        let issued = self.ca.issue_client_cert(name, groups)?;
        let users = self.dir.join("users");
        std::fs::create_dir_all(&users)
            .map_err(|e| TestEnvError::io("creating the users directory", e))?;
        let serial = self.next_user.fetch_add(1, Ordering::Relaxed);
        let stem: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let (credentials, kubeconfig) = write_user_files(
            &users,
            &format!("{stem}-{serial}"),
            name,
            &self.server,
            &self.ca_cert,
            self.ca.cert_der(),
            &issued,
        )?;
        Ok(TestUser::new(name, groups, kubeconfig, credentials))
    }

    /// The built kubectl with `--kubeconfig` set to the admin's.
    pub fn kubectl(&self) -> Command {
        let mut command = Command::new(&self.binaries.kubectl);
        command.arg("--kubeconfig").arg(&self.admin_kubeconfig);
        command
    }

    /// Creates a namespace with a unique name starting with `prefix`, so tests never collide.
    pub async fn create_namespace(&self, prefix: &str) -> Result<String, TestEnvError> {
        let name = unique_name(prefix);
        let namespaces: Api<Namespace> = Api::all(self.admin_client()?);
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..Default::default()
            },
            ..Default::default()
        };
        namespaces
            .create(&PostParams::default(), &namespace)
            .await
            .map_err(|e| TestEnvError::kube(format!("creating namespace {name}"), e))?;
        Ok(name)
    }

    /// Points the configurations at `url_base` (a server on loopback), trusts `ca_pem`, applies
    /// them and waits until they are visible. The API server picks them up shortly after, so
    /// callers still retry a dry-run request until the webhook answers.
    pub async fn register_webhooks(
        &self,
        validating: Option<ValidatingWebhookConfiguration>,
        mutating: Option<MutatingWebhookConfiguration>,
        url_base: &str,
        ca_pem: &str,
    ) -> Result<(), TestEnvError> {
        let client = self.admin_client()?;
        if let Some(mut config) = validating {
            let webhooks = config.webhooks.iter_mut().flatten();
            webhook::localize(webhooks.map(|w| &mut w.client_config), url_base, ca_pem)?;
            webhook::apply_and_wait(&client, &config).await?;
        }
        if let Some(mut config) = mutating {
            let webhooks = config.webhooks.iter_mut().flatten();
            webhook::localize(webhooks.map(|w| &mut w.client_config), url_base, ca_pem)?;
            webhook::apply_and_wait(&client, &config).await?;
        }
        Ok(())
    }

    /// Points the conversion webhook of each named CRD at `url_base` (its Service path kept),
    /// trusting `ca_pem`, and waits until the change is stored.
    pub(crate) async fn register_conversion(
        &self,
        crd_names: &[&str],
        url_base: &str,
        ca_pem: &str,
    ) -> Result<(), TestEnvError> {
        let client = self.admin_client()?;
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        for name in crd_names {
            let mut crd = crds
                .get(name)
                .await
                .map_err(|e| TestEnvError::kube(format!("reading CRD {name}"), e))?;
            let config = crd
                .spec
                .conversion
                .as_mut()
                .and_then(|c| c.webhook.as_mut())
                .and_then(|w| w.client_config.as_mut())
                .ok_or_else(|| {
                    TestEnvError::InvalidWebhook(format!("CRD {name} has no conversion webhook"))
                })?;
            let mut admission_config =
                k8s_openapi::api::admissionregistration::v1::WebhookClientConfig {
                    service: config.service.take().map(|s| {
                        k8s_openapi::api::admissionregistration::v1::ServiceReference {
                            name: s.name,
                            namespace: s.namespace,
                            path: s.path,
                            port: s.port,
                        }
                    }),
                    url: config.url.take(),
                    ca_bundle: None,
                };
            webhook::point_at_local(&mut admission_config, url_base, ca_pem)?;
            config.url = admission_config.url;
            config.ca_bundle = admission_config.ca_bundle;
            crd.metadata.managed_fields = None;
            crds.replace(name, &PostParams::default(), &crd)
                .await
                .map_err(|e| TestEnvError::kube(format!("updating CRD {name}"), e))?;
        }
        Ok(())
    }

    /// The CA behind every certificate here; it can sign serving certificates for local webhooks.
    pub fn ca(&self) -> &TestCa {
        &self.ca
    }

    /// Pids of the running components, in start order.
    pub fn pids(&self) -> Vec<u32> {
        self.processes.iter().map(ManagedProcess::pid).collect()
    }

    /// The temporary directory holding certificates, kubeconfigs, data and logs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The node, when the plane was started with one.
    pub fn node(&self) -> Option<&Node> {
        self.node.as_ref()
    }

    /// How long [`ControlPlane::start`] took.
    pub fn startup_duration(&self) -> Duration {
        self.startup
    }

    /// Stops kube-apiserver alone (SIGTERM, then SIGKILL after a grace), leaving etcd and every
    /// other component running: an API server outage, ended by [`ControlPlane::start_apiserver`].
    pub async fn stop_apiserver(&mut self) {
        let Some(at) = self
            .processes
            .iter()
            .position(|p| p.name == "kube-apiserver")
        else {
            return;
        };
        let mut process = self.processes.remove(at);
        let _ = tokio::task::spawn_blocking(move || process.stop()).await;
    }

    /// Starts kube-apiserver again, on the same port with the same flags and certificates, and
    /// waits until it is ready; a no-op while it runs. Its clients know it by its port, so while
    /// something else holds that port (it was free during the outage) it is tried again, a
    /// second apart, for half a minute.
    pub async fn start_apiserver(&mut self) -> Result<(), TestEnvError> {
        if self.processes.iter().any(|p| p.name == "kube-apiserver") {
            return Ok(());
        }
        let Some(launch) = self.apiserver.clone() else {
            return Ok(());
        };
        let client = self.admin_client()?;
        let process = while_port_taken(30, Duration::from_secs(1), || {
            apiserver::start(
                &self.binaries.apiserver,
                &self.dir,
                &launch.files,
                &self.etcd_url,
                launch.port,
                &launch.extra,
                client.clone(),
            )
        })
        .await?;
        self.processes.push(process);
        Ok(())
    }

    /// Stops every component (KCM, kube-apiserver, etcd) and removes the directory.
    pub async fn stop(mut self) {
        let _ = tokio::task::spawn_blocking(move || self.shutdown()).await;
    }

    fn shutdown(&mut self) {
        while let Some(mut process) = self.processes.pop() {
            process.stop();
        }
        node::cleanup::run_script(&self.dir);
        if let Some(mut watchdog) = self.watchdog.take() {
            let _ = std::fs::remove_dir_all(&self.dir);
            watchdog.dismiss();
        }
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.shutdown();
    }
}

async fn apply_crd(
    client: &kube::Client,
    crd: &CustomResourceDefinition,
) -> Result<(), TestEnvError> {
    webhook::apply_and_wait(client, crd).await?;
    let name = crd.metadata.name.clone().unwrap_or_default();
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    super::poll_until(
        &format!("CRD {name} to be Established"),
        CRD_TIMEOUT,
        Duration::from_millis(100),
        || async {
            let current = api.get_opt(&name).await.ok().flatten()?;
            let established = current
                .status?
                .conditions?
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            established.then_some(())
        },
    )
    .await
}

/// `prefix` cut to fit a DNS label, then a random suffix.
fn unique_name(prefix: &str) -> String {
    let clean: String = prefix
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(40)
        .collect();
    let clean = clean.trim_matches('-');
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
    if clean.is_empty() {
        format!("ns-{suffix}")
    } else {
        format!("{clean}-{suffix}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_names_are_dns_labels_and_differ() {
        let a = unique_name("RBAC_Test");
        let b = unique_name("RBAC_Test");
        assert_ne!(a, b);
        assert!(a.starts_with("rbac-test-"));
        assert_eq!(a.len(), "rbac-test-".len() + 8);
        assert!(unique_name("--").starts_with("ns-"));
        assert!(unique_name(&"x".repeat(100)).len() <= 49);
    }
}
