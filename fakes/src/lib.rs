//! `coordinator-fakes`: in-process HTTP fakes for tests, over real loopback
//! sockets (DESIGN.md "Testing").
//!
//! - [`FakeIssuer`]: an OpenID Connect issuer (discovery, JWKS, a token
//!   endpoint verifying `private_key_jwt` client assertions, caller tokens
//!   good and broken).
//! - One fake per product contract of SPEC §6: [`FakeBreg`],
//!   [`FakeMessaging`], [`FakeScheduling`], [`FakeCasework`],
//!   [`FakeDirectory`] (external HTTP), [`FakeEvaluation`].
//!
//! Every fake binds `127.0.0.1:0`, reports its base URL, records every
//! request ([`Recorded`]), and can be scripted per path ([`Reply`]): success,
//! refusal, retryable 503, a hang past the client's timeout, a reset after
//! reading the request, or a reset after doing the work. Mutations with an
//! `Idempotency-Key` are replayed: the same key gets the same answer, and
//! [`Fake::key_count`] / [`Fake::effect_count`] say how often it came and
//! how often it took effect. A fake stops when its last handle is dropped.

pub mod issuer;
pub mod keys;
pub mod products;
pub mod server;

pub use issuer::{FakeIssuer, Flaw, Mint, TokenRequest};
pub use keys::{KeyKind, TestKey};
pub use products::{
    ActionBehaviour, FakeBreg, FakeCasework, FakeDirectory, FakeEvaluation, FakeMessaging,
    FakeScheduling, Product,
};
pub use server::{problem, Fake, Recorded, Reply, Running, TokenCheck};
