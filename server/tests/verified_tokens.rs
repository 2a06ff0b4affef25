//! A verified caller token is kept until it expires (docs/decisions.md "A
//! verified token is kept until it expires"): kept tokens are answered
//! again only while their times pass now and the issuer's key set is the
//! one they were verified against. Against the fake issuer (its JWKS over
//! HTTP), with the verifier on a manual clock.

use std::collections::BTreeMap;
use std::sync::Arc;

use coordinator::auth::{AuthError, KeySource, Verifier, LEEWAY_SECONDS, REFRESH_MIN_SECONDS};
use coordinator_fakes::{FakeIssuer, Flaw, Mint, Reply};
use coordinator_ports::ManualClock;
use coordinator_runtime::config::Authentication;
use serde_json::{json, Value};

const AUDIENCE: &str = "registry-coordinator";
const PRODUCER: &str = "producer-app";

fn unix_now() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since.as_secs()).unwrap_or(0)
}

async fn verifier(issuer: &FakeIssuer, clock: &ManualClock) -> Verifier {
    let authentication = Authentication {
        issuer: issuer.issuer().to_owned(),
        audience: AUDIENCE.into(),
        jwks: None,
        policies: BTreeMap::new(),
    };
    Verifier::new(&authentication, KeySource::Uri(issuer.jwks_uri()))
        .with_clock(Arc::new(clock.clone()))
}

fn refusal(result: Result<impl std::fmt::Debug, AuthError>) -> String {
    match result {
        Err(AuthError::Refused(reason)) => reason,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn a_kept_token_is_refused_once_its_times_fail_now() {
    let issuer = FakeIssuer::start().await.expect("issuer");
    let clock = ManualClock::at_unix(unix_now());
    let verifier = verifier(&issuer, &clock).await;
    let token = issuer.mint(&Mint::new(PRODUCER, AUDIENCE));
    let first = verifier.verify(&token).await.expect("a good token");
    assert_eq!(first.client_id, PRODUCER);
    assert_eq!(verifier.verified_tokens_kept(), 1);
    let again = verifier.verify(&token).await.expect("the same token again");
    assert_eq!(again, first);
    assert_eq!(verifier.verified_tokens_kept(), 1, "kept once");
    let mut flawed = Mint::new(PRODUCER, AUDIENCE);
    flawed.flaw = Some(Flaw::WrongAudience);
    refusal(verifier.verify(&issuer.mint(&flawed)).await);
    assert_eq!(verifier.verified_tokens_kept(), 1, "a refusal is not kept");
    // The token lives 300 s; past its `exp` and the leeway it is refused,
    // though it was kept.
    let lifetime = i64::try_from(Mint::new(PRODUCER, AUDIENCE).lifetime_seconds).unwrap_or(0);
    let leeway = i64::try_from(LEEWAY_SECONDS).unwrap_or(0);
    clock.advance(lifetime + leeway + 2);
    assert_eq!(refusal(verifier.verify(&token).await), "expired");
    assert_eq!(
        verifier.verified_tokens_kept(),
        0,
        "an expired token is dropped"
    );
}

#[tokio::test]
async fn a_kept_token_whose_key_was_withdrawn_is_refused() {
    let issuer = FakeIssuer::start().await.expect("issuer");
    let clock = ManualClock::at_unix(unix_now());
    let verifier = verifier(&issuer, &clock).await;
    let token = issuer.mint(&Mint::new(PRODUCER, AUDIENCE));
    verifier.verify(&token).await.expect("a good ES256 token");
    assert_eq!(verifier.verified_tokens_kept(), 1);
    // The issuer withdraws its ES256 key: its JWKS now lists the others.
    let body = reqwest::get(issuer.jwks_uri())
        .await
        .expect("jwks")
        .bytes()
        .await
        .expect("jwks body");
    let published: Value = serde_json::from_slice(&body).expect("jwks json");
    let kept_keys: Vec<Value> = published["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .filter(|k| k["kty"] != "EC")
        .cloned()
        .collect();
    assert!(!kept_keys.is_empty(), "the RSA key stays: {published}");
    issuer.fake().script(
        "/jwks",
        std::iter::repeat_n(
            Reply::Json {
                status: 200,
                body: json!({ "keys": kept_keys }),
            },
            8,
        ),
    );
    // A token naming an unknown key makes the verifier fetch the JWKS
    // again (at most once per REFRESH_MIN_SECONDS).
    tokio::time::sleep(std::time::Duration::from_secs(REFRESH_MIN_SECONDS + 1)).await;
    let mut stray = Mint::new(PRODUCER, AUDIENCE);
    stray.flaw = Some(Flaw::UnknownKid);
    assert_eq!(
        refusal(verifier.verify(&issuer.mint(&stray)).await),
        "unknown kid"
    );
    // The kept token was verified against the key set before: it is
    // checked whole again, and its key is gone.
    let reason = refusal(verifier.verify(&token).await);
    assert!(reason.starts_with("unknown kid"), "{reason}");
    assert_eq!(verifier.verified_tokens_kept(), 0);
}
