//! The CLI's HTTP client to the coordinator service: the one place
//! `coordinatorctl` talks to the service's API, for the caller and
//! operator commands (`commands::ops`), the console (`commands::console`)
//! and `graph --run`.
//!
//! - `base_url.rs`: `--url` parsed by the `url` crate ([`service_url`]),
//!   each request URL built from it by path segments ([`request_path`]).
//! - `token_file.rs`: the access token from a regular, owner-only file
//!   ([`read_token`]), never printed.
//! - `transport.rs`: the HTTP client ([`http_client`]: no redirects, a
//!   timeout per request) and [`send`]: one request with the bearer token,
//!   its answer read whole ([`RawAnswer`]) or none ([`SendFailure`]).
//! - `call.rs`: a command's request ([`ServiceCall`], [`Conn`]) to the
//!   API's answer ([`fetch_answer`]), and `graph --run`'s inspection
//!   ([`fetch_inspection`]).
//! - `refusal.rs`: what got no answer of the API (a problem+json
//!   document, an answer of another shape, an unreachable service, an
//!   unusable token file), reported on stderr or in the JSON report
//!   ([`AnswerOrFailure`]); a problem's `next:` step ([`next_step`]).

mod base_url;
mod call;
mod refusal;
mod token_file;
mod transport;

pub(crate) use base_url::{request_path, service_url};
pub(crate) use call::{fetch_answer, fetch_inspection, Conn, ServiceCall};
pub(crate) use refusal::{cli_code, next_step, AnswerOrFailure};
pub(crate) use token_file::read_token;
pub(crate) use transport::{http_client, send, Body, Method, RawAnswer, SendFailure};
