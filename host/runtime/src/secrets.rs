//! Secret references (`secret:file/<name>`, `secret:env/<NAME>`) resolved to
//! their values (seed 000 "Create the keys, secrets, and roles"; SPEC §9).
//!
//! - `secret:file/<name>` reads one regular file directly under
//!   `secretProviders.file.root`. The file must not be a symbolic link, must
//!   grant nothing to group or others (mode `& 0o077 == 0`), and must belong
//!   to the user this process runs as.
//! - `secret:env/<NAME>` reads an environment variable, only when
//!   `secretProviders.environment: {}` is configured.
//!
//! Invariant: a secret value is never logged, printed or put in an error.
//! [`Secret`]'s `Debug` prints only its length; [`SecretError`] names the
//! reference (a name, not a value) and never the content.

use std::fmt;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use crate::codes;
use crate::config::{Deployment, SecretProviders, SecretRef};
use crate::keys::{AdmissionKey, AuditKey, KeyError, StateKeyring};

/// Largest secret accepted, in bytes (a PEM bundle fits; a mistake does not).
pub const MAX_SECRET_BYTES: u64 = 1024 * 1024;

/// A resolved secret value. `Debug` shows only the length; the bytes are
/// overwritten with zeros on drop.
pub struct Secret(Vec<u8>);

impl Secret {
    /// The raw bytes (key files are used as they are: 32 bytes).
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl From<Vec<u8>> for Secret {
    /// A value held in memory (tests, and a secret source other than the
    /// runtime file's providers); overwritten with zeros on drop like any
    /// other.
    fn from(bytes: Vec<u8>) -> Self {
        Secret(bytes)
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({} bytes)", self.0.len())
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        for b in self.0.iter_mut() {
            *b = 0;
        }
    }
}

/// Why a reference could not be resolved. Each variant has its own code
/// ([`SecretError::code`]); none carries the secret's content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecretError {
    /// The reference is not `secret:file/<one component>` or
    /// `secret:env/<NAME>`. The reference itself is not echoed: it may be a
    /// value pasted where a reference belongs.
    Reference,
    /// `secret:file/` without `secretProviders.file`, or `secret:env/`
    /// without `secretProviders.environment: {}`.
    ProviderDisabled {
        /// The reference.
        reference: String,
    },
    /// The file or variable does not exist or cannot be read (exit 3).
    Unavailable {
        /// The reference.
        reference: String,
        /// The operating system's reason.
        reason: String,
    },
    /// The path is a symbolic link, a directory or another non-regular file.
    NotRegularFile {
        /// The reference.
        reference: String,
    },
    /// The file grants read, write or execute to group or others.
    Permissions {
        /// The reference.
        reference: String,
        /// The file's permission bits (`mode & 0o777`).
        mode: u32,
    },
    /// The file belongs to another user than this process's.
    Owner {
        /// The reference.
        reference: String,
    },
    /// Larger than [`MAX_SECRET_BYTES`], or not UTF-8 where text is needed.
    Content {
        /// The reference.
        reference: String,
        /// What is wrong (never the content).
        reason: String,
    },
    /// A key secret has the wrong length (keys are exactly 32 bytes).
    Key {
        /// The reference.
        reference: String,
        /// The key error.
        error: KeyError,
    },
}

impl SecretError {
    /// The code as `coordinatorctl` prints it: `coordinator.secret.reference`,
    /// `coordinator.secret.provider-disabled`, `coordinator.secret.unavailable`,
    /// `coordinator.secret.not-regular-file`, `coordinator.secret.permissions`,
    /// `coordinator.secret.owner`, `coordinator.secret.content`,
    /// `coordinator.secret.key-length`.
    pub fn cli_code(&self) -> &'static str {
        match self {
            SecretError::Reference => codes::SECRET_REFERENCE,
            SecretError::ProviderDisabled { .. } => codes::SECRET_PROVIDER_DISABLED,
            SecretError::Unavailable { .. } => codes::SECRET_UNAVAILABLE,
            SecretError::NotRegularFile { .. } => codes::SECRET_NOT_REGULAR_FILE,
            SecretError::Permissions { .. } => codes::SECRET_PERMISSIONS,
            SecretError::Owner { .. } => codes::SECRET_OWNER,
            SecretError::Content { .. } => codes::SECRET_CONTENT,
            SecretError::Key { .. } => codes::SECRET_KEY_LENGTH,
        }
    }

    /// The stable code without the CLI's `coordinator.` prefix
    /// (`secret.reference`, ...; see [`SecretError::cli_code`]).
    pub fn code(&self) -> &'static str {
        let code = self.cli_code();
        code.strip_prefix("coordinator.").unwrap_or(code)
    }

    /// Whether the secret could not be read at all (the CLI exits 3), as
    /// opposed to being refused (exit 1).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, SecretError::Unavailable { .. })
    }
}

impl fmt::Display for SecretError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretError::Reference => write!(
                f,
                "a secret reference is not `secret:file/<name>` or `secret:env/<NAME>`"
            ),
            SecretError::ProviderDisabled { reference } => write!(
                f,
                "`{reference}` needs a secret provider that secretProviders does not enable"
            ),
            SecretError::Unavailable { reference, reason } => {
                write!(f, "cannot read `{reference}`: {reason}")
            }
            SecretError::NotRegularFile { reference } => write!(
                f,
                "`{reference}` is not a regular file directly under the secret root (symbolic links are refused)"
            ),
            SecretError::Permissions { reference, mode } => write!(
                f,
                "`{reference}` has mode {mode:04o}; a secret file must be owner-only (chmod 0600)"
            ),
            SecretError::Owner { reference } => write!(
                f,
                "`{reference}` belongs to another user than the one this process runs as"
            ),
            SecretError::Content { reference, reason } => {
                write!(f, "`{reference}` {reason}")
            }
            SecretError::Key { reference, error } => write!(f, "`{reference}`: {error}"),
        }
    }
}

impl std::error::Error for SecretError {}

/// Resolves references against one file's `secretProviders`.
#[derive(Clone, Debug)]
pub struct SecretResolver {
    file_root: Option<PathBuf>,
    environment: bool,
}

impl SecretResolver {
    /// A resolver for `providers` (as the runtime file configures them).
    pub fn new(providers: &SecretProviders) -> Self {
        SecretResolver {
            file_root: providers.file.as_ref().map(|f| PathBuf::from(&f.root)),
            environment: providers.environment.is_some(),
        }
    }

    /// Resolves `reference` to its bytes.
    ///
    /// # Errors
    /// See [`SecretError`]; each refusal names the reference only.
    pub fn resolve(&self, reference: &SecretRef) -> Result<Secret, SecretError> {
        let r = reference.0.as_str();
        if let Some(name) = r.strip_prefix("secret:file/") {
            if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\\', '\0']) {
                return Err(SecretError::Reference);
            }
            let root = self
                .file_root
                .as_ref()
                .ok_or_else(|| SecretError::ProviderDisabled {
                    reference: r.to_owned(),
                })?;
            read_secret_file(r, &root.join(name))
        } else if let Some(name) = r.strip_prefix("secret:env/") {
            let mut chars = name.chars();
            let valid = chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(SecretError::Reference);
            }
            if !self.environment {
                return Err(SecretError::ProviderDisabled {
                    reference: r.to_owned(),
                });
            }
            match std::env::var_os(name) {
                Some(v) => Ok(Secret(v.into_encoded_bytes())),
                None => Err(SecretError::Unavailable {
                    reference: r.to_owned(),
                    reason: "the environment variable is not set".into(),
                }),
            }
        } else {
            Err(SecretError::Reference)
        }
    }

    /// Resolves a bearer token Casework presents (a connection's
    /// `completion.bearerTokenRef`): its bytes as they are, 1 to
    /// [`MAX_COMPLETION_TOKEN_BYTES`].
    ///
    /// # Errors
    /// As [`SecretResolver::resolve`], and [`SecretError::Content`] when the
    /// value is empty or longer (never echoed).
    pub fn resolve_completion_token(&self, reference: &SecretRef) -> Result<Secret, SecretError> {
        let secret = self.resolve(reference)?;
        let reason = if secret.bytes().is_empty() {
            "is empty".to_owned()
        } else if secret.bytes().len() > MAX_COMPLETION_TOKEN_BYTES {
            format!(
                "is {} bytes; a completion token holds at most {MAX_COMPLETION_TOKEN_BYTES}",
                secret.bytes().len()
            )
        } else {
            return Ok(secret);
        };
        Err(SecretError::Content {
            reference: reference.0.clone(),
            reason,
        })
    }

    /// Resolves a text secret (a database URL, a token): UTF-8, with one
    /// trailing `\n` or `\r\n` removed.
    ///
    /// # Errors
    /// As [`SecretResolver::resolve`], and [`SecretError::Content`] when the
    /// value is not UTF-8 or is empty.
    pub fn resolve_text(&self, reference: &SecretRef) -> Result<String, SecretError> {
        let secret = self.resolve(reference)?;
        let text = std::str::from_utf8(secret.bytes()).map_err(|_| SecretError::Content {
            reference: reference.0.clone(),
            reason: "is not UTF-8 text".into(),
        })?;
        let text = text
            .strip_suffix("\r\n")
            .or_else(|| text.strip_suffix('\n'))
            .unwrap_or(text);
        if text.is_empty() {
            return Err(SecretError::Content {
                reference: reference.0.clone(),
                reason: "is empty".into(),
            });
        }
        Ok(text.to_owned())
    }
}

/// The most bytes a review-completion bearer token may hold
/// (`completion.bearerTokenRef`, docs/runtime.md).
pub const MAX_COMPLETION_TOKEN_BYTES: usize = 4096;

fn read_secret_file(reference: &str, path: &std::path::Path) -> Result<Secret, SecretError> {
    let unavailable = |e: std::io::Error| SecretError::Unavailable {
        reference: reference.to_owned(),
        reason: e.to_string(),
    };
    // lstat first: a symbolic link is refused, never followed.
    let link = std::fs::symlink_metadata(path).map_err(unavailable)?;
    if !link.file_type().is_file() {
        return Err(SecretError::NotRegularFile {
            reference: reference.to_owned(),
        });
    }
    let mut file = std::fs::File::open(path).map_err(unavailable)?;
    // fstat the opened file: it must be the inode that lstat saw (no swap
    // between the two calls).
    let meta = file.metadata().map_err(unavailable)?;
    if meta.ino() != link.ino() || meta.dev() != link.dev() || !meta.is_file() {
        return Err(SecretError::NotRegularFile {
            reference: reference.to_owned(),
        });
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(SecretError::Permissions {
            reference: reference.to_owned(),
            mode,
        });
    }
    // `/proc/self` belongs to the effective user of this process.
    if let Ok(me) = std::fs::metadata("/proc/self") {
        if me.uid() != meta.uid() {
            return Err(SecretError::Owner {
                reference: reference.to_owned(),
            });
        }
    }
    if meta.len() > MAX_SECRET_BYTES {
        return Err(SecretError::Content {
            reference: reference.to_owned(),
            reason: format!("is larger than {MAX_SECRET_BYTES} bytes"),
        });
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    (&mut file)
        .take(MAX_SECRET_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(unavailable)?;
    Ok(Secret(bytes))
}

/// The deployment's three keys, resolved and checked (32 bytes each).
#[derive(Clone, Debug)]
pub struct DeploymentKeys {
    /// Every configured state key version; the active one seals.
    pub state: StateKeyring,
    /// The admission key.
    pub admission: AdmissionKey,
    /// The audit key.
    pub audit: AuditKey,
}

/// Resolves `deployment.stateKeys` into a keyring with `activeStateKey`
/// active.
///
/// # Errors
/// Any [`SecretError`]; a key of the wrong length or a missing active
/// version is [`SecretError::Key`].
pub fn load_state_keyring(
    resolver: &SecretResolver,
    deployment: &Deployment,
) -> Result<StateKeyring, SecretError> {
    let mut versions = Vec::new();
    for (version, key) in &deployment.state_keys {
        let v: u32 = version.parse().map_err(|_| SecretError::Reference)?;
        versions.push((v, resolver.resolve(&key.key_ref)?.bytes().to_vec()));
    }
    StateKeyring::new(versions, deployment.active_state_key).map_err(|error| SecretError::Key {
        reference: format!("deployment.stateKeys.{}", deployment.active_state_key),
        error,
    })
}

/// Resolves all three keys of `deployment`.
///
/// # Errors
/// Any [`SecretError`] (see [`load_state_keyring`]).
pub fn load_keys(
    resolver: &SecretResolver,
    deployment: &Deployment,
) -> Result<DeploymentKeys, SecretError> {
    let state = load_state_keyring(resolver, deployment)?;
    let admission = load_admission_key(resolver, deployment)?;
    let audit = load_audit_key(resolver, deployment)?;
    Ok(DeploymentKeys {
        state,
        admission,
        audit,
    })
}

/// Resolves `deployment.admissionKeyRef`.
///
/// # Errors
/// Any [`SecretError`]; [`SecretError::Key`] for a key that is not 32
/// bytes.
pub fn load_admission_key(
    resolver: &SecretResolver,
    deployment: &Deployment,
) -> Result<AdmissionKey, SecretError> {
    AdmissionKey::new(resolver.resolve(&deployment.admission_key_ref)?.bytes()).map_err(|error| {
        SecretError::Key {
            reference: deployment.admission_key_ref.0.clone(),
            error,
        }
    })
}

/// Resolves `deployment.auditKeyRef`.
///
/// # Errors
/// Any [`SecretError`].
pub fn load_audit_key(
    resolver: &SecretResolver,
    deployment: &Deployment,
) -> Result<AuditKey, SecretError> {
    AuditKey::new(resolver.resolve(&deployment.audit_key_ref)?.bytes()).map_err(|error| {
        SecretError::Key {
            reference: deployment.audit_key_ref.0.clone(),
            error,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{EnvironmentProvider, FileProvider};
    use std::os::unix::fs::PermissionsExt;

    fn resolver(root: &std::path::Path, env: bool) -> SecretResolver {
        SecretResolver::new(&SecretProviders {
            file: Some(FileProvider {
                root: root.display().to_string(),
            }),
            environment: env.then_some(EnvironmentProvider {}),
        })
    }

    fn write(root: &std::path::Path, name: &str, body: &[u8], mode: u32) {
        let p = root.join(name);
        std::fs::write(&p, body).expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    fn r(s: &str) -> SecretRef {
        SecretRef(s.into())
    }

    #[test]
    fn file_secrets_must_be_owner_only_regular_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        write(root, "good", b"postgres://x\n", 0o600);
        write(root, "group", b"v", 0o640);
        write(root, "other", b"v", 0o604);
        std::os::unix::fs::symlink(root.join("good"), root.join("link")).expect("symlink");
        std::fs::create_dir(root.join("dir")).expect("dir");
        let res = resolver(root, false);
        assert_eq!(
            res.resolve_text(&r("secret:file/good")).expect("good"),
            "postgres://x"
        );
        assert_eq!(
            res.resolve(&r("secret:file/group")).map(|_| ()),
            Err(SecretError::Permissions {
                reference: "secret:file/group".into(),
                mode: 0o640
            })
        );
        assert_eq!(
            res.resolve(&r("secret:file/other"))
                .map(|_| ())
                .map_err(|e| e.code()),
            Err("secret.permissions")
        );
        for name in ["link", "dir"] {
            assert_eq!(
                res.resolve(&r(&format!("secret:file/{name}")))
                    .map(|_| ())
                    .map_err(|e| e.code()),
                Err("secret.not-regular-file"),
                "{name}"
            );
        }
        let missing = res.resolve(&r("secret:file/missing")).map(|_| ());
        assert!(missing.as_ref().is_err_and(SecretError::is_unavailable));
        for bad in [
            "secret:file/../x",
            "secret:file/a/b",
            "plain-value",
            "secret:env/1X",
        ] {
            assert_eq!(
                res.resolve(&r(bad)).map(|_| ()),
                Err(SecretError::Reference),
                "{bad}"
            );
        }
    }

    #[test]
    fn env_secrets_need_the_environment_provider_and_errors_hold_no_value() {
        let dir = tempfile::tempdir().expect("tempdir");
        // PATH is always set; its value must never appear in an error.
        let off = resolver(dir.path(), false);
        assert_eq!(
            off.resolve(&r("secret:env/PATH"))
                .map(|_| ())
                .map_err(|e| e.code()),
            Err("secret.provider-disabled")
        );
        let on = resolver(dir.path(), true);
        let s = on.resolve(&r("secret:env/PATH")).expect("PATH");
        assert!(!format!("{s:?}").contains('/'));
        write(dir.path(), "loose", b"hunter2-secret", 0o644);
        let e = on.resolve(&r("secret:file/loose")).expect_err("refused");
        assert!(!e.to_string().contains("hunter2"));
    }
}
