//! `coordinatorctl move apply`: moves the waiting runs a filter matches to
//! the revision a move certificate names, through the service's `POST
//! /v1/runs/{run}/move`, one run at a time with the bulk actions' rules
//! (`ops/bulk.rs`: an empty filter refused, `--dry-run`, confirmation,
//! `--max-per-second`, Ctrl-C, run again to go on, a summary by result).
//! The certificate is read and its digest verified here first
//! (`coordinator.move.certificate`); the service verifies it again
//! against the revisions it holds (docs/operations.md "Moving waiting
//! runs").
//!
//! Exit codes: those of the bulk actions (0 every run moved or skipped,
//! 1 a run refused otherwise, 2 usage or a certificate that is not valid,
//! 3 the certificate cannot be read or the service cannot be reached,
//! 130 interrupted).

use std::path::PathBuf;

use clap::Args;
use coordinator_ir::moves::MoveCertificate;
use serde_json::json;

use crate::codes;
use crate::commands::ops::bulk::{self, Bulk};
use crate::commands::ops::moving::Moving;
use crate::report::{self, EXIT_UNAVAILABLE, EXIT_USAGE};
use crate::service_client::Conn;
use crate::Format;

/// Largest certificate file read, in bytes: what the service's move route
/// reads (the certificate is most of the request).
const MAX_CERTIFICATE_BYTES: u64 = coordinator_api::MAX_MOVE_BODY_BYTES as u64;

/// Arguments of `move apply`.
#[derive(Args, Debug)]
pub struct ApplyArgs {
    /// The move certificate `move plan` wrote.
    #[arg(long, value_name = "CERT")]
    pub certificate: PathBuf,
    /// The runs to move: `key=value` pairs separated by `,` (as the bulk
    /// actions' `--filter`; the certificate's workflow is added).
    #[arg(long, value_name = "F")]
    pub filter: String,
    /// An investigation reference holding no personal data (audited with
    /// each move).
    #[arg(long, value_name = "REF")]
    pub reason: String,
    /// Print how many runs would move and how many would be skipped, by
    /// reason; move nothing.
    #[arg(long = "dry-run")]
    pub dry_run: bool,
    /// Move without asking on the terminal.
    #[arg(long)]
    pub yes: bool,
    /// At most this many runs a second (1..=100; default 10).
    #[arg(long = "max-per-second", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=100))]
    pub max_per_second: Option<u32>,
    #[command(flatten)]
    pub conn: Conn,
}

/// Runs `move apply`; returns the exit code.
pub fn run(args: ApplyArgs) -> u8 {
    let moving = match read_certificate(&args) {
        Ok(m) => m,
        Err(exit) => return exit,
    };
    let b = Bulk {
        action: "move",
        filter: args.filter,
        reason: args.reason,
        dry_run: args.dry_run,
        yes: args.yes,
        max_per_second: args.max_per_second.unwrap_or(bulk::DEFAULT_MAX_PER_SECOND),
        conn: args.conn,
        moving: Some(moving),
    };
    match report::io_runtime() {
        Ok(runtime) => runtime.block_on(bulk::run(b)),
        Err(exit) => exit,
    }
}

/// The certificate of `--certificate`, read whole and verified
/// ([`MoveCertificate::from_json`]); `Err` holds the exit code after the
/// refusal was reported: 3 unreadable, 2 not a valid certificate.
fn read_certificate(args: &ApplyArgs) -> Result<Moving, u8> {
    let path = args.certificate.display().to_string();
    let fail = |exit: u8, message: String| {
        let next = "give the certificate `coordinatorctl move plan` wrote, unchanged";
        match args.conn.format {
            Format::Json => report::print_json_line(
                "move",
                false,
                "refused",
                json!({"error": {"code": codes::MOVE_CERTIFICATE, "at": path, "title": message, "next": next}}),
            ),
            Format::Text => errln!(
                "error[{}] {path}\n  {message}\n  next: {next}",
                codes::MOVE_CERTIFICATE
            ),
        }
        exit
    };
    let metadata = std::fs::metadata(&args.certificate).map_err(|e| {
        fail(
            EXIT_UNAVAILABLE,
            format!("cannot read the certificate: {e}"),
        )
    })?;
    if !metadata.is_file() || metadata.len() > MAX_CERTIFICATE_BYTES {
        return Err(fail(
            EXIT_USAGE,
            format!("not a regular file of at most {MAX_CERTIFICATE_BYTES} bytes"),
        ));
    }
    let bytes = std::fs::read(&args.certificate).map_err(|e| {
        fail(
            EXIT_UNAVAILABLE,
            format!("cannot read the certificate: {e}"),
        )
    })?;
    let certificate =
        MoveCertificate::from_json(&bytes).map_err(|e| fail(EXIT_USAGE, e.to_string()))?;
    let members = serde_json::from_slice(&bytes).map_err(|e| fail(EXIT_USAGE, e.to_string()))?;
    Ok(Moving {
        certificate: members,
        workflow: certificate.workflow.clone(),
        from_revision: certificate.from.revision.clone(),
        waits: certificate
            .waits
            .iter()
            .map(|w| (w.from.clone(), w.movable))
            .collect(),
    })
}
