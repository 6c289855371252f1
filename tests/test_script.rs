//! The README's test command, tried as a new user without cloudflared tries it: it stops at once
//! with one line saying where to get a release binary and how to point at it, before it
//! installs or builds anything.
use std::process::Command;

fn test_script(cloudflared: Option<&str>) -> std::process::Output {
    let mut command = Command::new("bash");
    command
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/test.sh"))
        .env_remove("CFTUNNEL_CLOUDFLARED")
        // A PATH with the shell's tools and no cloudflared (nor cargo: nothing may be built).
        .env("PATH", "/usr/bin:/bin");
    if let Some(path) = cloudflared {
        command.env("CFTUNNEL_CLOUDFLARED", path);
    }
    command.output().expect("run scripts/test.sh")
}

fn assert_one_line_that_says_how(out: &std::process::Output) {
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    for needed in [
        "no cloudflared",
        "https://github.com/cloudflare/cloudflared/releases",
        "CFTUNNEL_CLOUDFLARED=/path/to/cloudflared scripts/test.sh",
    ] {
        assert!(stderr.contains(needed), "{needed:?} missing: {stderr}");
    }
}

#[test]
fn without_cloudflared_the_test_command_stops_at_once_saying_where_to_get_it() {
    if std::path::Path::new("/usr/bin/cloudflared").exists()
        || std::path::Path::new("/bin/cloudflared").exists()
    {
        panic!("this check needs a PATH of /usr/bin:/bin without cloudflared on it");
    }
    assert_one_line_that_says_how(&test_script(None));
}

#[test]
fn a_cloudflared_variable_that_names_no_program_is_refused_the_same_way() {
    let out = test_script(Some("/nonexistent/cloudflared"));
    assert_one_line_that_says_how(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("at /nonexistent/cloudflared"), "{stderr}");
}
