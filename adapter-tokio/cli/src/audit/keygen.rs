//! `spillguard audit keygen NAME --out PREFIX`: an Ed25519 key pair for
//! signed checkpoints, in the signed-note text forms Go's `sumdb/note`
//! reads (`note.NewSigner`, `note.NewVerifier`): PREFIX.key holds the
//! signer key (`PRIVATE+KEY+NAME+HASH+BASE64`, mode 0600), PREFIX.pub the
//! verifier key (`NAME+HASH+BASE64`). Neither file may exist already, and
//! on any refusal nothing is written.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use spillguard_std::proto::audit::note::SignerKey;
use zeroize::Zeroizing;

use crate::args::KeygenArgs;

/// Exit status of a refusal (bad input) and of a failed write.
const USAGE: u8 = 2;
const OUTPUT_FAILED: u8 = 1;

/// Makes the key pair `args` asks for and prints where it went.
pub fn keygen(args: &KeygenArgs) -> ExitCode {
    match make(args) {
        Ok((key, public)) => {
            println!(
                "{}: signer key (keep it secret)\n{}: verifier key {}",
                key.display(),
                public.display(),
                std::fs::read_to_string(&public).unwrap_or_default().trim()
            );
            ExitCode::SUCCESS
        }
        Err((status, why)) => {
            eprintln!("spillguard: audit keygen: {why}");
            ExitCode::from(status)
        }
    }
}

/// `PREFIX` with `extension` added (`PREFIX.key`), not replacing one.
fn with_extension(prefix: &Path, extension: &str) -> PathBuf {
    let mut path = prefix.as_os_str().to_owned();
    path.push(".");
    path.push(extension);
    PathBuf::from(path)
}

fn make(args: &KeygenArgs) -> Result<(PathBuf, PathBuf), (u8, String)> {
    let mut seed = Zeroizing::new([0u8; 32]);
    getrandom::fill(&mut *seed)
        .map_err(|e| (OUTPUT_FAILED, format!("no randomness for the key: {e}")))?;
    let key = SignerKey::from_seed(&args.name, *seed).map_err(|e| (USAGE, format!("NAME: {e}")))?;
    let (secret, public) = (
        with_extension(&args.out, "key"),
        with_extension(&args.out, "pub"),
    );
    let prefix = args.out.as_os_str().as_encoded_bytes();
    if prefix.ends_with(b"/") || args.out.is_dir() {
        return Err((
            USAGE,
            format!(
                "--out: {} is a directory: PREFIX is the files' path without .key and .pub",
                args.out.display()
            ),
        ));
    }
    for path in [&secret, &public] {
        // A symbolic link counts, even one that leads nowhere.
        if path.symlink_metadata().is_ok() {
            return Err((
                USAGE,
                format!("--out: {} exists; nothing was written", path.display()),
            ));
        }
    }
    write_new(
        &secret,
        0o600,
        format!("{}\n", key.to_text().as_str()).as_bytes(),
    )
    .map_err(|e| (OUTPUT_FAILED, format!("--out: {}: {e}", secret.display())))?;
    let verifier = format!("{}\n", key.verifier().to_text());
    if let Err(e) = write_new(&public, 0o644, verifier.as_bytes()) {
        // Not half a pair: the signer key goes too.
        let _ = std::fs::remove_file(&secret);
        return Err((OUTPUT_FAILED, format!("--out: {}: {e}", public.display())));
    }
    Ok((secret, public))
}

/// Writes `bytes` to `path`, which must not exist, with `mode`.
fn write_new(path: &Path, mode: u32, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)?;
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    if written.is_err() {
        let _ = std::fs::remove_file(path);
    }
    written
}
