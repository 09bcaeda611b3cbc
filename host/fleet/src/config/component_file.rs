//! Reading a component file a tenants file names, as `run` and `check --config` both read it:
//! within the compile size bound, and with one wording for what goes wrong, naming the file as
//! the tenants file writes it.

use std::path::Path;

/// The bytes of the component file at `path`, shown in a refusal as `shown` (the path as the
/// tenants file writes it), when it holds at most `max_bytes`.
///
/// # Errors
/// One line: `cannot read SHOWN: why`, or the file is larger than a component may be.
pub async fn read(path: &Path, shown: &str, max_bytes: usize) -> Result<Vec<u8>, String> {
    let size = tokio::fs::metadata(path)
        .await
        .map_err(|e| format!("cannot read {shown}: {e}"))?
        .len();
    if size > max_bytes as u64 {
        return Err(format!(
            "{shown} is {size} bytes, more than the {max_bytes} a component may have \
             (`compile_max_bytes`)"
        ));
    }
    tokio::fs::read(path)
        .await
        .map_err(|e| format!("cannot read {shown}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_missing_file_and_one_too_large_are_named_as_written() {
        let dir =
            std::env::temp_dir().join(format!("ruststream-component-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a folder");
        let missing = read(&dir.join("gone.wasm"), "../gone.wasm", 10).await;
        let error = missing.expect_err("missing");
        assert!(error.starts_with("cannot read ../gone.wasm: "), "{error}");
        let big = dir.join("big.wasm");
        std::fs::write(&big, [0_u8; 11]).expect("written");
        let error = read(&big, "big.wasm", 10).await.expect_err("too large");
        assert_eq!(
            error,
            "big.wasm is 11 bytes, more than the 10 a component may have (`compile_max_bytes`)"
        );
        assert_eq!(read(&big, "big.wasm", 11).await, Ok(vec![0; 11]));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
