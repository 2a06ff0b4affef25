//! The `coordinator-sandbox` binary: usage and refusals, the files it
//! writes (owner-only), the caller tokens it mints (verified against its
//! issuer's JWKS), products that refuse a request without a token, and a
//! clean stop on SIGTERM.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{decode, decode_header, DecodingKey, Validation};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_coordinator-sandbox");

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn usage_and_a_non_empty_directory_are_refused() {
    let out = Command::new(BIN).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("usage: coordinator-sandbox DIR"));

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("something"), b"x").unwrap();
    let out = Command::new(BIN).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("is not empty"), "{stderr}");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "nothing written"
    );
}

#[test]
fn writes_owner_only_files_mints_verifiable_tokens_and_stops_on_sigterm() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("sandbox");
    let mut child = Command::new(BIN)
        .arg(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !dir.join("sandbox.env").exists() {
        assert!(child.try_wait().unwrap().is_none(), "sandbox exited early");
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "not ready in 20 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("sandbox.json")).unwrap()).unwrap();
    let env = std::fs::read_to_string(dir.join("sandbox.env")).unwrap();
    for (key, value) in json.as_object().unwrap() {
        let value = value.as_str().unwrap();
        assert!(
            env.contains(&format!("{key}='{value}'\n")),
            "{key} in {env}"
        );
    }
    assert_eq!(json.as_object().unwrap().len(), env.lines().count());

    assert_eq!(mode(&dir), 0o700);
    let secrets = dir.join("secrets");
    assert_eq!(json["SANDBOX_SECRETS"], secrets.display().to_string());
    assert_eq!(mode(&secrets), 0o700);
    for name in [
        "applications-client-key",
        "notices-client-key",
        "review-client-key",
    ] {
        let path = secrets.join(name);
        assert_eq!(mode(&path), 0o600, "{name}");
        let jwk: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert!(jwk["d"].is_string(), "{name} is a private JWK");
    }
    for name in [
        "producer-token",
        "operator-token",
        "control-token",
        "sandbox.env",
        "sandbox.json",
        "secrets/review-completion-token",
    ] {
        assert_eq!(mode(&dir.join(name)), 0o600, "{name}");
    }

    let issuer = json["SANDBOX_ISSUER"].as_str().unwrap().to_owned();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let http = reqwest::Client::new();
    let jwks: JwkSet = rt.block_on(async {
        let text = http
            .get(format!("{issuer}/jwks"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        serde_json::from_str(&text).unwrap()
    });
    let completion = secrets.join("review-completion-token");
    for (file, client, audience) in [
        (
            json["SANDBOX_PRODUCER_TOKEN_FILE"].as_str().unwrap(),
            "producer-app",
            "registry-coordinator",
        ),
        (
            json["SANDBOX_OPERATOR_TOKEN_FILE"].as_str().unwrap(),
            "ops-console",
            "registry-coordinator",
        ),
        (completion.to_str().unwrap(), "casework", "casework"),
    ] {
        let token = std::fs::read_to_string(file).unwrap();
        let header = decode_header(&token).unwrap();
        assert_eq!(header.typ.as_deref(), Some("at+jwt"));
        let jwk = jwks.find(header.kid.as_deref().unwrap()).unwrap();
        let mut validation = Validation::new(header.alg);
        validation.set_audience(&[audience]);
        validation.set_issuer(&[issuer.as_str()]);
        let claims = decode::<Value>(&token, &DecodingKey::from_jwk(jwk).unwrap(), &validation)
            .unwrap()
            .claims;
        assert_eq!(claims["client_id"], client);
        let lifetime = claims["exp"].as_u64().unwrap() - claims["iat"].as_u64().unwrap();
        assert_eq!(lifetime, 3600, "one hour, the longest the service accepts");
    }

    // The products take only tokens the issuer's token endpoint issued.
    let breg = json["SANDBOX_BREG_URL"].as_str().unwrap().to_owned();
    let record = format!("{breg}/v1/collections/applications/records/demo-application");
    let caller = std::fs::read_to_string(dir.join("producer-token")).unwrap();
    let (bare, caller_token) = rt.block_on(async {
        let bare = http.get(&record).send().await.unwrap().status().as_u16();
        let with = http
            .get(&record)
            .bearer_auth(caller)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16();
        (bare, with)
    });
    assert_eq!((bare, caller_token), (401, 401));

    let ports = ["SANDBOX_LISTENER_PORT", "SANDBOX_METRICS_PORT"]
        .map(|k| json[k].as_str().unwrap().parse::<u16>().unwrap());
    assert_ne!(ports[0], ports[1]);

    // `decide`: usage, and a refusal while Casework holds no request (the
    // run of scripts/run.sh reviewed-notice is the journey's,
    // server/tests/tutorial/).
    let decide = |args: &[&str]| Command::new(BIN).arg("decide").args(args).output().unwrap();
    let out = decide(&[dir.to_str().unwrap(), "maybe"]);
    assert_eq!(out.status.code(), Some(2));
    let out = decide(&[dir.to_str().unwrap(), "approve"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no review request is pending"), "{stderr}");
    let out = decide(&[scratch.path().to_str().unwrap(), "decline"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is coordinator-sandbox serving"),
        "{stderr}"
    );
    // The control listener takes only DIR's control token.
    let control = json["SANDBOX_CONTROL_URL"].as_str().unwrap().to_owned();
    let refused = rt.block_on(async {
        http.post(format!("{control}/review-decisions"))
            .bearer_auth("not-the-control-token")
            .header("content-type", "application/json")
            .body(r#"{"outcome":"approved"}"#)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    });
    assert_eq!(refused, 401);

    let killed = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("not for production"), "{stdout}");
    assert!(
        stdout.contains("coordinator-sandbox: stopping (0 message(s) accepted"),
        "{stdout}"
    );
}
