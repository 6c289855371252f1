//! The key settings of the hardened cloudflared Deployment of Tunnel demo/shop.
use k8s_openapi::api::apps::v1::Deployment;
use kube::{Api, Client};

pub(crate) async fn print(client: &Client, namespace: &str) {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let Ok(Some(deployment)) = deployments.get_opt("shop").await else {
        println!("  cloudflared Deployment {namespace}/shop: not found");
        return;
    };
    let spec = deployment.spec;
    let pod = spec.template.spec.unwrap_or_default();
    let container = pod.containers.first().cloned().unwrap_or_default();
    let security = container.security_context.unwrap_or_default();
    let pod_security = pod.security_context.unwrap_or_default();
    let dropped = security
        .capabilities
        .and_then(|c| c.drop)
        .unwrap_or_default()
        .join(",");
    let seccomp = pod_security
        .seccomp_profile
        .or(security.seccomp_profile)
        .map(|p| p.type_)
        .unwrap_or_default();
    println!("  cloudflared Deployment {namespace}/shop (hardened):");
    println!(
        "    replicas {} · image {}",
        spec.replicas.unwrap_or(1),
        container.image.unwrap_or_default()
    );
    println!(
        "    runAsNonRoot {} · readOnlyRootFilesystem {} · allowPrivilegeEscalation {} · capabilities drop [{dropped}] · seccomp {seccomp}",
        pod_security
            .run_as_non_root
            .or(security.run_as_non_root)
            .unwrap_or(false),
        security.read_only_root_filesystem.unwrap_or(false),
        security.allow_privilege_escalation.unwrap_or(true),
    );
    println!(
        "    automountServiceAccountToken {} · serviceAccount {}",
        pod.automount_service_account_token.unwrap_or(true),
        pod.service_account_name.unwrap_or_default()
    );
}
