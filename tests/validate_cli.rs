//! `cftunnel validate` and `cftunnel certs`, run as a user runs them; the table of invalid
//! manifests under tests/data/admission/ proves every admission rule of docs/design.md §2.1 and §2.2.
use std::collections::BTreeSet;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const TABLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/admission");

fn cftunnel() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cftunnel"))
}

fn validate(args: &[&str]) -> Output {
    cftunnel()
        .arg("validate")
        .args(args)
        .output()
        .expect("run cftunnel validate")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// One file of the table: its expected message fragments and rule tags (docs/design.md §2.1, §2.2).
struct Case {
    path: PathBuf,
    expects: Vec<String>,
    rules: Vec<String>,
}

fn table() -> Vec<Case> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(TABLE)
        .expect("read the table directory")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let content = std::fs::read_to_string(&path).expect("read case");
            let header = |key: &str| -> Vec<String> {
                content
                    .lines()
                    .filter_map(|l| l.strip_prefix(key))
                    .map(str::to_string)
                    .collect()
            };
            let rules = header("# rule: ")
                .iter()
                .flat_map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
                .collect();
            Case {
                expects: header("# expect: "),
                rules,
                path,
            }
        })
        .collect()
}

/// `<Kind> <namespace>/<name>` (or `ClusterTunnel <name>`) of a violation line.
fn object_of(line: &str) -> Option<&str> {
    let (object, _) = line.split_once(": ")?;
    let (kind, name) = object.split_once(' ')?;
    let well_formed = match kind {
        "ClusterTunnel" => !name.is_empty() && !name.contains('/'),
        "Tunnel" | "TunnelBinding" | "Service" | "AccessTunnel" | "AccessPolicy" => name
            .split_once('/')
            .is_some_and(|(ns, n)| !ns.is_empty() && !n.is_empty() && !n.contains('/')),
        _ => false,
    };
    well_formed.then_some(object)
}

#[test]
fn every_table_case_is_refused_with_exactly_its_expected_messages() {
    for case in table() {
        let name = case.path.display();
        let out = validate(&["-f", &case.path.to_string_lossy()]);
        let stdout = text(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{name}: {stdout}{}",
            text(&out.stderr)
        );
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(
            lines.len(),
            case.expects.len(),
            "{name}: one line per expected violation, got:\n{stdout}"
        );
        for fragment in &case.expects {
            assert!(
                stdout.contains(fragment.as_str()),
                "{name}: missing {fragment:?} in:\n{stdout}"
            );
        }
        // One refused object per case: the objects before it are valid, so the case can be
        // applied to a real API server in order.
        let objects: BTreeSet<&str> = lines
            .iter()
            .map(|l| object_of(l).unwrap_or_else(|| panic!("{name}: bad prefix in {l:?}")))
            .collect();
        assert_eq!(objects.len(), 1, "{name}: {objects:?}");
    }
}

#[test]
fn the_table_covers_every_create_rule() {
    let cases = table();
    assert!(cases.len() >= 45, "only {} cases", cases.len());
    for case in &cases {
        assert!(
            !case.expects.is_empty(),
            "{}: no # expect: line",
            case.path.display()
        );
        assert!(
            !case.rules.is_empty(),
            "{}: no # rule: line",
            case.path.display()
        );
    }
    let rules: BTreeSet<&str> = cases
        .iter()
        .flat_map(|c| c.rules.iter().map(String::as_str))
        .collect();
    for rule in [
        "2.1.1", "2.1.2", "2.1.3", "2.1.4", "2.1.5", "2.1.6", "2.2.1", "2.2.2", "2.2.3", "2.2.4",
        "2.2.5", "2.2.6", "2.5.1", "2.5.2", "2.5.3", "2.5.4",
    ] {
        assert!(rules.contains(rule), "no case for docs/design.md §{rule}");
    }
    let expects: Vec<&str> = cases
        .iter()
        .flat_map(|c| c.expects.iter().map(String::as_str))
        .collect();
    for message in [
        cftunnel_types::cel::BOTH_TUNNEL_SOURCES,
        cftunnel_types::cel::NO_TUNNEL_SOURCE,
        cftunnel_types::cel::NAME_TOO_LONG,
        cftunnel_types::cel::ACCESS_POLICY_NOBODY_ALLOWED,
    ] {
        assert!(
            expects.contains(&message),
            "CEL message not covered: {message}"
        );
    }
    let field_paths = [
        "spec",
        "metadata.name",
        "spec.newTunnel.name",
        "spec.existingTunnel.id",
        "spec.cloudflare",
        "spec.cloudflare.domain",
        "spec.cloudflare.secret",
        "spec.cloudflare.accountId",
        "spec.protocol",
        "spec.fallbackTarget",
        "spec.allowedRoutes.namespaces.from",
        "spec.allowedRoutes.namespaces.selector",
        "spec.deployPatch: spec.selector",
        "spec.deployPatch: spec.template.spec.serviceAccountName",
        "spec.deployPatch: spec.template.spec.serviceAccount",
        "spec.deployPatch: spec.template.spec.automountServiceAccountToken",
        "spec.deployPatch: spec.template.spec.containers",
        "spec.deployPatch: spec.template.spec.hostNetwork",
        "spec.deployPatch: spec.template.spec.hostPID",
        "spec.deployPatch: spec.template.spec.hostIPC",
        "spec.deployPatch: spec.template.spec.securityContext.runAsUser",
        "spec.deployPatch: spec.template.spec.volumes[0].hostPath",
        "spec.deployPatch: spec.template.spec.containers[0].securityContext.privileged",
        "spec.deployPatch: spec.template.spec.containers[0].securityContext.allowPrivilegeEscalation",
        "spec.deployPatch: spec.template.spec.containers[0].securityContext.capabilities.add",
        "spec.deployPatch: spec.template.spec.containers[0].securityContext.runAsUser",
        "subjects",
        "subjects[0].kind",
        "subjects[0].name",
        "subjects[1]",
        "subjects[1].spec.fqdn",
        "subjects[0].spec.fqdn",
        "subjects[0].spec.protocol",
        "subjects[0].spec.proxyType",
        "subjects[0].spec.proxyPort",
        "subjects[0].spec.proxyAddress",
        "subjects[0].spec.path",
        "subjects[0].spec.target",
        "subjects[0].spec.connectTimeout",
        "subjects[0].spec.tlsTimeout",
        "subjects[0].spec.keepAliveTimeout",
        "tunnelRef",
        "tunnelRef.kind",
        "TunnelBinding shop/default-host (default hostname)",
        "metadata.labels",
        "metadata.labels[cfargotunnel.com/expose-cluster-tunnel]",
        "metadata.annotations[cfargotunnel.com/hostname]",
        "metadata.annotations[cfargotunnel.com/protocol]",
        "metadata.annotations[cfargotunnel.com/path]",
        "metadata.annotations[cfargotunnel.com/no-tls-verify]",
        "metadata.annotations[cfargotunnel.com/http2-origin]",
        "metadata.annotations[cfargotunnel.com/disable-dns]",
        "Service shop/api (default hostname)",
    ];
    for path in field_paths {
        let prefix = format!("{path}: ");
        assert!(
            expects.iter().any(|e| e.starts_with(&prefix)),
            "no case for field path {path}"
        );
    }
    // The distinct problems of the route rules, whichever field carries them.
    for problem in [
        "is not a valid DNS name",
        "must not contain a port",
        "must not end with a dot",
        "may contain `*` only as the whole first label",
        "is longer than 244 characters",
        "is listed twice in this binding",
        "is already exposed by TunnelBinding",
        "is already exposed by Service",
        "is already routed through",
        "does not admit routes from namespace",
        "is not a URL",
        "has no host",
        "has a path",
        "has unsupported scheme",
        "has an invalid status code",
        "needs an absolute socket path",
        "is not a boolean",
        "are both set",
    ] {
        assert!(
            expects.iter().any(|e| e.contains(problem)),
            "no case for {problem:?}"
        );
    }
}

#[test]
fn the_go_operator_documented_manifests_pass() {
    let valid = format!("{TABLE}/valid");
    let mut files: Vec<String> = std::fs::read_dir(&valid)
        .expect("read valid/")
        .map(|e| e.expect("entry").path().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert!(files.len() >= 6, "{files:?}");
    // All together (tunnels known) and one by one (tunnels unknown: warnings only).
    let mut runs = vec![vec!["-f".to_string(), valid.clone()]];
    runs.extend(files.iter().map(|f| vec!["-f".to_string(), f.clone()]));
    for args in runs {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = validate(&args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        assert_eq!(text(&out.stdout), "", "{args:?}");
    }
    let together = validate(&["-f", &valid]);
    assert_eq!(
        text(&together.stderr),
        "",
        "all tunnels are given, so no warning"
    );
}

const EDGE: &str = "apiVersion: networking.cfargotunnel.com/v1alpha2
kind: ClusterTunnel
metadata: {name: edge}
spec:
  newTunnel: {name: edge}
  cloudflare: {domain: example.org, secret: cf, accountId: 0123456789abcdef0123456789abcdef}
";

fn binding(name: &str, namespace: &str) -> String {
    format!(
        "apiVersion: networking.cfargotunnel.com/v1alpha1
kind: TunnelBinding
metadata: {{name: {name}, namespace: {namespace}}}
subjects: [{{name: {name}, spec: {{fqdn: shared.example.org}}}}]
tunnelRef: {{kind: ClusterTunnel, name: edge}}
"
    )
}

fn write(dir: &Path, name: &str, content: &str) -> String {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("create dirs");
    std::fs::write(&path, content).expect("write manifest");
    path.to_string_lossy().into_owned()
}

#[test]
fn the_earlier_claimant_in_input_order_owns_the_hostname() {
    let dir = tempfile::tempdir().expect("temp dir");
    let tunnel = write(dir.path(), "edge.yaml", EDGE);
    let blog = write(dir.path(), "blog.yaml", &binding("front", "blog"));
    let shop = write(dir.path(), "shop.yaml", &binding("web", "shop"));
    let out = validate(&["-f", &tunnel, "-f", &blog, "-f", &shop]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stdout),
        "TunnelBinding shop/web: subjects[0].spec.fqdn: shared.example.org is already exposed by TunnelBinding blog/front (subject front); remove it there first\n"
    );
    let out = validate(&["-f", &tunnel, "-f", &shop, "-f", &blog]);
    assert_eq!(
        text(&out.stdout),
        "TunnelBinding blog/front: subjects[0].spec.fqdn: shared.example.org is already exposed by TunnelBinding shop/web (subject web); remove it there first\n"
    );
}

const ACCESS_POLICY_HEAD: &str = "apiVersion: networking.cfargotunnel.com/v1alpha2
kind: AccessPolicy
metadata: {name: staff, namespace: shop}
";

/// An AccessPolicy that lets nobody in, and one reaching into another namespace, are refused
/// with their messages (exit 1); each line names its policy.
#[test]
fn access_policies_that_let_nobody_in_or_reach_another_namespace_are_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let empty = write(
        dir.path(),
        "empty.yaml",
        &format!(
            "{ACCESS_POLICY_HEAD}spec:\n  targetRefs: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, name: shop}}]\n  allow: {{}}\n"
        ),
    );
    let across = write(
        dir.path(),
        "across.yaml",
        "apiVersion: networking.cfargotunnel.com/v1alpha2
kind: AccessPolicy
metadata: {name: web}
spec:
  targetRefs: [{group: networking.cfargotunnel.com, kind: TunnelBinding, name: web, namespace: blog}]
  allow: {emailDomains: [example.com]}
",
    );
    let out = validate(&["-f", &empty, "-f", &across, "-n", "shop"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "AccessPolicy shop/staff: spec.allow and spec.policies are both empty: an AccessPolicy that lets nobody in would lock the routes; add spec.allow.emails, emailDomains, groups, serviceTokens or anyValidServiceToken: true, or name a reusable policy in spec.policies
AccessPolicy shop/web: spec.targetRefs[0].namespace: an AccessPolicy protects objects of its own namespace only; create the AccessPolicy in namespace blog
"
    );
}

/// The example policy passes silently; a GRPCRoute target passes with its warning on stderr.
#[test]
fn a_good_access_policy_passes_and_a_grpc_target_only_warns() {
    let dir = tempfile::tempdir().expect("temp dir");
    let good = format!("{TABLE}/valid/accesspolicy.yaml");
    let out = validate(&["-f", &good]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert_eq!(
        (text(&out.stdout), text(&out.stderr)),
        (String::new(), String::new())
    );
    let grpc = write(
        dir.path(),
        "grpc.yaml",
        &format!(
            "{ACCESS_POLICY_HEAD}spec:\n  targetRefs: [{{group: gateway.networking.k8s.io, kind: GRPCRoute, name: rpc}}]\n  policies: [staff]\n"
        ),
    );
    let out = validate(&["-f", &grpc]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert_eq!(text(&out.stdout), "");
    assert!(
        text(&out.stderr).contains("AccessPolicy shop/staff: spec.targetRefs[0]: Cloudflare Access does not apply to gRPC: the GRPCRoute target will be refused and left unprotected"),
        "{}",
        text(&out.stderr)
    );
}

fn network_route(namespace: &str, name: &str, fields: &str) -> String {
    format!(
        "apiVersion: networking.cfargotunnel.com/v1alpha2
kind: NetworkRoute
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  tunnelRef: {{kind: ClusterTunnel, name: edge}}
{fields}"
    )
}

/// NetworkRoutes claim CIDRs and private hostnames in input order: a later one asking for the
/// same CIDR, an overlapping range or the same hostname is refused naming the earlier one, and
/// a CIDR with host bits set names the canonical range; a VirtualNetwork named by a route may
/// come later in the input, and routes in two networks do not collide.
#[test]
fn network_routes_are_judged_against_the_earlier_ones() {
    let dir = tempfile::tempdir().expect("temp dir");
    let tunnel = write(dir.path(), "edge.yaml", EDGE);
    let blog = write(
        dir.path(),
        "blog.yaml",
        &network_route(
            "blog",
            "lan",
            "  cidrs: [10.20.0.0/24]\n  hostnames: [db.internal]\n",
        ),
    );
    let shop = write(
        dir.path(),
        "shop.yaml",
        &[
            network_route("shop", "same", "  cidrs: [10.20.0.0/24]\n"),
            network_route("shop", "wide", "  cidrs: [10.20.0.0/16]\n"),
            network_route("shop", "names", "  hostnames: [\"*.DB.internal.\"]\n"),
            network_route("shop", "bits", "  cidrs: [10.30.0.7/24]\n"),
            network_route(
                "shop",
                "staging",
                "  virtualNetworkRef: {name: staging}\n  cidrs: [10.20.0.0/24]\n",
            ),
        ]
        .join("---\n"),
    );
    let staging = write(
        dir.path(),
        "staging.yaml",
        "apiVersion: networking.cfargotunnel.com/v1alpha2
kind: VirtualNetwork
metadata: {name: staging}
spec:
  name: staging
  cloudflare: {accountId: 0123456789abcdef0123456789abcdef, secret: cloudflare}
",
    );
    let out = validate(&["-f", &tunnel, "-f", &blog, "-f", &shop, "-f", &staging]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "NetworkRoute shop/same: spec.cidrs[0]: 10.20.0.0/24 is already routed by NetworkRoute blog/lan in the account's default network; remove it there first
NetworkRoute shop/wide: spec.cidrs[0]: 10.20.0.0/16 overlaps 10.20.0.0/24, routed by NetworkRoute blog/lan in the account's default network: Cloudflare routes by longest prefix, so 10.20.0.0/24 would take the traffic of its addresses from the route of 10.20.0.0/16; route ranges that do not overlap, or put one in another VirtualNetwork
NetworkRoute shop/names: spec.hostnames[0]: db.internal is already routed by NetworkRoute blog/lan: a private hostname is routed once per account, in every network; remove it there first
NetworkRoute shop/bits: spec.cidrs[0]: 10.30.0.7/24 has host bits set; use 10.30.0.0/24
"
    );
    assert_eq!(
        text(&out.stderr),
        "",
        "the network and the tunnel are given"
    );
    let out = validate(&["-f", &tunnel, "-f", &blog]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
}

#[test]
fn dash_reads_standard_input() {
    let case = format!("{TABLE}/tunnel-both-sources.yaml");
    let mut child = cftunnel()
        .args(["validate", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn cftunnel validate");
    let content = std::fs::read(&case).expect("read case");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(&content)
        .expect("write stdin");
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stdout), text(&validate(&["-f", &case]).stdout));
    assert_eq!(
        text(&out.stdout),
        format!(
            "Tunnel shop/web: {}\n",
            cftunnel_types::cel::BOTH_TUNNEL_SOURCES
        )
    );
}

#[test]
fn a_directory_is_read_recursively_and_only_manifest_files() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(dir.path(), "a/edge.yml", EDGE);
    write(
        dir.path(),
        "a/b/c/web.json",
        r#"{"apiVersion": "networking.cfargotunnel.com/v1alpha1", "kind": "TunnelBinding",
        "metadata": {"name": "web", "namespace": "shop"},
        "subjects": [{"name": "web", "spec": {"fqdn": "web.example.org", "protocol": "quic"}}],
        "tunnelRef": {"kind": "ClusterTunnel", "name": "edge"}}"#,
    );
    write(dir.path(), "a/notes.txt", "kind: [ not yaml");
    let out = validate(&["-f", &dir.path().to_string_lossy()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "TunnelBinding shop/web: subjects[0].spec.protocol: \"quic\" is not supported; use http, https, tcp, udp, ssh, rdp or smb\n"
    );
}

#[test]
fn a_missing_file_exits_2_naming_the_path() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("nope.yaml");
    let out = validate(&["-f", &missing.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(text(&out.stdout), "");
    assert_eq!(
        text(&out.stderr),
        format!("error: {}: no such file or directory\n", missing.display())
    );
}

#[test]
fn a_yaml_syntax_error_exits_2_naming_file_and_document() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = write(
        dir.path(),
        "broken.yaml",
        &format!("{EDGE}---\nkind: [unclosed\n"),
    );
    let out = validate(&["-f", &file]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(text(&out.stdout), "");
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with(&format!(
            "error: {file}: document 2: not valid YAML or JSON: "
        )),
        "{stderr}"
    );
}

#[test]
fn help_says_which_rules_are_skipped() {
    let out = cftunnel()
        .args(["validate", "--help"])
        .output()
        .expect("run help");
    let help = text(&out.stdout);
    assert!(help.contains("Only CREATE rules run: UPDATE rules (immutability, ratcheting) and rules that need cluster"), "{help}");
    assert!(help.contains("--namespace"), "{help}");
}

#[test]
fn certs_writes_a_ca_and_a_serving_certificate_with_private_keys() {
    let dir = tempfile::tempdir().expect("temp dir");
    let certs = dir.path().join("certs");
    let out = cftunnel()
        .args([
            "certs",
            "--dir",
            &certs.to_string_lossy(),
            "--host",
            "localhost",
            "--host",
            "127.0.0.1",
        ])
        .output()
        .expect("run cftunnel certs");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let names = ["ca.crt", "ca.key", "tls.crt", "tls.key"];
    let expected: String = names
        .iter()
        .map(|n| format!("{}\n", certs.join(n).display()))
        .collect();
    assert_eq!(text(&out.stdout), expected);
    for name in names {
        let path = certs.join(name);
        let content = std::fs::read_to_string(&path).expect("read written file");
        let mode = std::fs::metadata(&path)
            .expect("metadata")
            .permissions()
            .mode()
            & 0o777;
        if name.ends_with(".key") {
            assert!(content.contains("PRIVATE KEY"), "{name}");
            assert_eq!(mode, 0o600, "{name}");
        } else {
            assert!(content.starts_with("-----BEGIN CERTIFICATE-----"), "{name}");
        }
    }
    assert!(!text(&out.stdout).contains("PRIVATE KEY"));
}

#[test]
fn certs_refuses_a_bad_host() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = cftunnel()
        .args([
            "certs",
            "--dir",
            &dir.path().to_string_lossy(),
            "--host",
            "höst",
        ])
        .output()
        .expect("run cftunnel certs");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("host \"höst\" is not a valid DNS name or IP address"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        !dir.path().join("ca.key").exists(),
        "nothing is written for a bad host"
    );
}

/// Every object of the table (and of valid/) fits the structural schema of its CRD version,
/// so the table can be sent through a real API server: what refuses it is CEL or the webhook.
/// Cases headed `# refused-by: schema` are the exception: their last object breaks the schema
/// (a required field, a bound), which the API server refuses before CEL and webhooks.
#[test]
fn table_objects_fit_their_crd_schemas() {
    use cftunnel_types::crds::{self, ConversionService};
    let mut validators = std::collections::BTreeMap::new();
    for crd in crds::all(&ConversionService::default()) {
        let crd = serde_json::to_value(&crd).expect("CRD as JSON");
        let group = crd["spec"]["group"].as_str().expect("group").to_string();
        let kind = crd["spec"]["names"]["kind"]
            .as_str()
            .expect("kind")
            .to_string();
        for version in crd["spec"]["versions"].as_array().expect("versions") {
            let schema = &version["schema"]["openAPIV3Schema"];
            let name = version["name"].as_str().expect("version name");
            let validator = jsonschema::draft4::new(schema).expect("schema compiles");
            validators.insert((format!("{group}/{name}"), kind.clone()), validator);
        }
    }
    let mut files: Vec<PathBuf> = table().into_iter().map(|c| c.path).collect();
    files.extend(
        std::fs::read_dir(format!("{TABLE}/valid"))
            .expect("read valid/")
            .map(|e| e.expect("entry").path()),
    );
    let mut checked = 0;
    let mut schema_refused = 0;
    for file in files {
        let content = std::fs::read_to_string(&file).expect("read case");
        let by_schema = content.lines().any(|l| l == "# refused-by: schema");
        let documents: Vec<serde_json::Value> = serde_yaml_ng::Deserializer::from_str(&content)
            .map(|d| serde::Deserialize::deserialize(d).expect("case YAML parses"))
            .collect();
        if by_schema {
            let last = documents.last().expect("a document");
            let key = (
                last["apiVersion"].as_str().unwrap_or("").to_string(),
                last["kind"].as_str().unwrap_or("").to_string(),
            );
            let validator = validators.get(&key).expect("a kind of ours");
            assert!(
                validator.iter_errors(last).next().is_some(),
                "{}: the schema accepts it",
                file.display()
            );
            schema_refused += 1;
            continue;
        }
        for value in documents {
            let key = (
                value["apiVersion"].as_str().unwrap_or("").to_string(),
                value["kind"].as_str().unwrap_or("").to_string(),
            );
            if let Some(validator) = validators.get(&key) {
                let errors: Vec<String> = validator
                    .iter_errors(&value)
                    .map(|e| format!("{}: {e}", e.instance_path()))
                    .collect();
                assert!(errors.is_empty(), "{}: {errors:?}", file.display());
                checked += 1;
            }
        }
    }
    assert!(checked >= 100, "only {checked} objects checked");
    assert_eq!(schema_refused, 2, "cases refused by the schema");
}
