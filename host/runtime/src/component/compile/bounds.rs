//! Size bounds checked before a component is compiled: cheap to check, and they refuse the
//! obvious bombs (a huge file, a huge function, a flood of functions) without Cranelift ever
//! seeing them.

use wasmparser::{Parser, Payload};

use super::CompileError;
use crate::limits::CompileLimits;

/// Walks every core module nested in `bytes` (a single pass, no validation) and refuses the
/// component when it is past a bound.
///
/// # Errors
/// [`CompileError::Bound`] naming the bound; [`CompileError::Invalid`] when the binary cannot
/// even be walked.
pub(crate) fn check(bytes: &[u8], limits: &CompileLimits) -> Result<(), CompileError> {
    bound(
        "the component",
        " bytes",
        bytes.len(),
        limits.max_bytes,
        "compile_max_bytes",
    )?;
    let mut functions = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        let payload = payload.map_err(|error| CompileError::Invalid(error.to_string()))?;
        if let Payload::CodeSectionEntry(body) = payload {
            functions += 1;
            bound(
                "the number of functions",
                "",
                functions,
                limits.max_functions,
                "compile_max_functions",
            )?;
            bound(
                "a function body",
                " bytes",
                body.range().len(),
                limits.max_function_bytes,
                "compile_max_function_bytes",
            )?;
        }
    }
    Ok(())
}

fn bound(
    what: &'static str,
    unit: &'static str,
    actual: usize,
    limit: usize,
    key: &'static str,
) -> Result<(), CompileError> {
    if actual <= limit {
        return Ok(());
    }
    Err(CompileError::Bound {
        what,
        unit,
        actual,
        limit,
        key,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A core module with `functions` functions of `body` bytes of `nop`s each.
    fn module(functions: u32, body: usize) -> Vec<u8> {
        let mut code = Vec::new();
        let mut entry = vec![0x00]; // no locals
        entry.extend(std::iter::repeat_n(0x01, body)); // nop
        entry.push(0x0b); // end
        leb(&mut code, functions);
        for _ in 0..functions {
            leb(&mut code, entry.len() as u32);
            code.extend(&entry);
        }
        let mut out = b"\0asm\x01\0\0\0".to_vec();
        out.extend([0x01, 0x04, 0x01, 0x60, 0x00, 0x00]); // type section: () -> ()
        let mut funcs = Vec::new();
        leb(&mut funcs, functions);
        funcs.extend(std::iter::repeat_n(0x00, functions as usize));
        section(&mut out, 0x03, &funcs);
        section(&mut out, 0x0a, &code);
        out
    }

    fn section(out: &mut Vec<u8>, id: u8, body: &[u8]) {
        out.push(id);
        leb(out, body.len() as u32);
        out.extend(body);
    }

    fn leb(out: &mut Vec<u8>, mut value: u32) {
        loop {
            let byte = (value & 0x7f) as u8;
            value >>= 7;
            if value == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }

    fn limits() -> CompileLimits {
        CompileLimits {
            max_bytes: 1 << 20,
            max_functions: 10,
            max_function_bytes: 1000,
            ..CompileLimits::default()
        }
    }

    #[test]
    fn each_bound_is_named() {
        assert!(check(&module(10, 900), &limits()).is_ok());
        let functions = check(&module(11, 10), &limits()).expect_err("11 functions");
        assert!(
            functions.to_string().contains("compile_max_functions"),
            "{functions}"
        );
        let body = check(&module(1, 2000), &limits()).expect_err("a 2000-byte body");
        assert!(
            body.to_string().contains("compile_max_function_bytes"),
            "{body}"
        );
        let bytes = check(&vec![0; 2 << 20], &limits()).expect_err("2 MiB");
        assert!(bytes.to_string().contains("compile_max_bytes"), "{bytes}");
    }

    #[test]
    fn garbage_is_invalid_not_a_panic() {
        let error = check(b"\0asm\x0d\0\x01\0\xff\xff", &limits()).expect_err("garbage");
        assert!(matches!(error, CompileError::Invalid(_)), "{error}");
    }
}
