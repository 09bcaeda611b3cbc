//! The compile worker: Cranelift runs in a child process bounded by `setrlimit` (address
//! space, CPU time) and a wall-clock timeout, at a lower priority, and hands back an artifact.
//!
//! A few kilobytes of hostile WebAssembly can keep Cranelift busy for minutes or make it
//! allocate gigabytes; in a child process that costs the child, never the host, which keeps
//! serving meanwhile. The worker is the host's own program run as `PROGRAM compile-worker
//! FLAGS`: it reads the component on stdin and writes the artifact on stdout, or one line on
//! stderr saying why not.

use std::io::{Read as _, Write as _};
use std::path::Path;
use std::process::{ExitCode, ExitStatus, Stdio};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::CompileError;
use crate::component::engine_config;
use crate::limits::{CompileBudget, CompileLimits, RuntimeConfig};
use ruststream_common::escape::one_line;

/// The argument that makes a program a compile worker.
pub const WORKER_COMMAND: &str = "compile-worker";

/// Exit codes of the worker, beyond 0 (artifact written).
const EXIT_INVALID: u8 = 2;
const EXIT_MEMORY: u8 = 3;
const EXIT_USAGE: u8 = 64;
/// Most of the worker's stderr kept: its one line, or the tail of a crash.
const STDERR_CAP: u64 = 4 << 10;

/// Compiles `bytes` in a worker process running `program`.
///
/// # Errors
/// The bound the worker went past, or why it could not compile.
pub(crate) async fn compile(
    program: &Path,
    config: &RuntimeConfig,
    bytes: &[u8],
) -> Result<Vec<u8>, CompileError> {
    let limits = &config.compile.limits;
    let budget = limits.budget(bytes.len());
    let mut child = tokio::process::Command::new(program)
        .arg(WORKER_COMMAND)
        .args(flags(config, budget))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| CompileError::WorkerIo {
            doing: "to start",
            source,
        })?;
    let (Some(mut stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(CompileError::Worker("its pipes are missing".into()));
    };
    let exchange = async {
        let write = async {
            // A worker that dies early closes its stdin; its exit status says why.
            let _ = stdin.write_all(bytes).await;
            drop(stdin);
        };
        let mut artifact = Vec::new();
        let mut message = Vec::new();
        let mut stdout = stdout.take(limits.memory_bytes);
        let mut stderr = stderr.take(STDERR_CAP);
        let read_out = stdout.read_to_end(&mut artifact);
        let read_err = stderr.read_to_end(&mut message);
        let ((), out, err) = tokio::join!(write, read_out, read_err);
        out.and(err).map_err(|source| CompileError::WorkerIo {
            doing: "while its output was read",
            source,
        })?;
        let status = child
            .wait()
            .await
            .map_err(|source| CompileError::WorkerIo {
                doing: "to exit",
                source,
            })?;
        Ok::<_, CompileError>((status, artifact, message))
    };
    let (status, artifact, message) = tokio::time::timeout(budget.timeout, exchange)
        .await
        .map_err(|_elapsed| CompileError::Timeout(budget.timeout))??;
    judge(
        status,
        artifact,
        &String::from_utf8_lossy(&message),
        limits,
        budget,
    )
}

/// What the worker's exit says.
fn judge(
    status: ExitStatus,
    artifact: Vec<u8>,
    message: &str,
    limits: &CompileLimits,
    budget: CompileBudget,
) -> Result<Vec<u8>, CompileError> {
    use std::os::unix::process::ExitStatusExt as _;
    let last_line = message.lines().last().unwrap_or("").trim().to_owned();
    let memory = || CompileError::Memory(limits.memory_bytes >> 20);
    match (status.code(), status.signal()) {
        (Some(0), _) => Ok(artifact),
        (Some(code), _) if code == i32::from(EXIT_INVALID) => Err(CompileError::Invalid(last_line)),
        (Some(code), _) if code == i32::from(EXIT_MEMORY) => Err(memory()),
        (_, Some(libc::SIGXCPU | libc::SIGKILL)) => Err(CompileError::CpuTime(budget.cpu)),
        // Rust aborts when an allocation fails under `RLIMIT_AS`.
        (_, Some(libc::SIGABRT)) if message.contains("memory allocation") => Err(memory()),
        (code, signal) => {
            let exit = code.map_or_else(
                || format!("signal {}", signal.unwrap_or_default()),
                |code| format!("code {code}"),
            );
            let said = if last_line.is_empty() {
                "no message"
            } else {
                &last_line
            };
            Err(CompileError::Worker(format!("exited with {exit}: {said}")))
        }
    }
}

/// The worker's flags for `config` and a component's `budget`: what its engine and its limits
/// must be.
fn flags(config: &RuntimeConfig, budget: CompileBudget) -> Vec<String> {
    let limits = &config.compile.limits;
    vec![
        format!("--deadlines={}", config.deadlines),
        format!("--fuel={}", config.fuel),
        format!("--max-wasm-stack={}", config.max_wasm_stack),
        format!("--max-bytes={}", limits.max_bytes),
        format!("--cpu-seconds={}", budget.cpu.as_secs().max(1)),
        format!("--memory-bytes={}", limits.memory_bytes),
    ]
}

/// What the worker was asked to do.
struct Request {
    config: RuntimeConfig,
    cpu_seconds: u64,
    memory_bytes: u64,
}

impl Request {
    fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, String> {
        let mut request = Self {
            config: RuntimeConfig::in_process(),
            cpu_seconds: 0,
            memory_bytes: 0,
        };
        for arg in args {
            let (flag, value) = arg
                .split_once('=')
                .ok_or_else(|| format!("expected --flag=value, got `{arg}`"))?;
            let config = &mut request.config;
            match flag {
                "--deadlines" => config.deadlines = parse(flag, value)?,
                "--fuel" => config.fuel = parse(flag, value)?,
                "--max-wasm-stack" => config.max_wasm_stack = parse(flag, value)?,
                "--max-bytes" => config.compile.limits.max_bytes = parse(flag, value)?,
                "--cpu-seconds" => request.cpu_seconds = parse(flag, value)?,
                "--memory-bytes" => request.memory_bytes = parse(flag, value)?,
                _ => return Err(format!("unknown flag `{flag}`")),
            }
        }
        if request.cpu_seconds == 0 || request.memory_bytes == 0 {
            return Err("--cpu-seconds and --memory-bytes are required".into());
        }
        Ok(request)
    }
}

fn parse<T: std::str::FromStr>(flag: &str, value: &str) -> Result<T, String> {
    value
        .parse()
        .map_err(|_| format!("bad value for {flag}: `{value}`"))
}

/// The worker's side: call this from `main` when the program's first argument is
/// [`WORKER_COMMAND`], with the arguments after it. Limits itself, reads a component on stdin,
/// writes its artifact on stdout.
pub fn compile_worker(args: impl IntoIterator<Item = String>) -> ExitCode {
    let request = match Request::parse(args) {
        Ok(request) => request,
        Err(usage) => return fail(EXIT_USAGE, &usage),
    };
    if let Err(error) = limit_self(request.memory_bytes, request.cpu_seconds) {
        return fail(EXIT_USAGE, &format!("cannot limit the worker: {error}"));
    }
    let max = request.config.compile.limits.max_bytes;
    let mut bytes = Vec::new();
    if let Err(error) = std::io::stdin()
        .take(max as u64 + 1)
        .read_to_end(&mut bytes)
    {
        return fail(EXIT_USAGE, &format!("reading the component: {error}"));
    }
    if bytes.len() > max {
        return fail(EXIT_INVALID, &format!("the component is over {max} bytes"));
    }
    let mut wasm = engine_config(&request.config);
    // One thread: the CPU limit then bounds wall time too, and the host keeps the other core.
    wasm.parallel_compilation(false);
    let compiled =
        wasmtime::Engine::new(&wasm).and_then(|engine| engine.precompile_component(&bytes));
    match compiled {
        Ok(artifact) => match std::io::stdout().lock().write_all(&artifact) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => fail(EXIT_USAGE, &format!("writing the artifact: {error}")),
        },
        Err(error) => {
            let line = one_line(&*error);
            let code = if is_out_of_memory(&line) {
                EXIT_MEMORY
            } else {
                EXIT_INVALID
            };
            fail(code, &line)
        }
    }
}

fn is_out_of_memory(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    message.contains("cannot allocate memory") || message.contains("out of memory")
}

fn fail(code: u8, message: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "{message}");
    ExitCode::from(code)
}

/// Caps the worker's address space and CPU time, and lowers its priority.
fn limit_self(memory_bytes: u64, cpu_seconds: u64) -> std::io::Result<()> {
    set_limit(libc::RLIMIT_AS, memory_bytes, memory_bytes)?;
    // SIGXCPU at the soft limit, SIGKILL a second later should it be caught.
    set_limit(libc::RLIMIT_CPU, cpu_seconds, cpu_seconds + 1)?;
    // SAFETY: `nice` only changes this process's scheduling priority.
    unsafe { libc::nice(10) };
    Ok(())
}

fn set_limit(resource: libc::__rlimit_resource_t, soft: u64, hard: u64) -> std::io::Result<()> {
    let limit = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: `setrlimit` reads the struct passed by reference and only lowers this process's
    // own limits.
    if unsafe { libc::setrlimit(resource, &limit) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_round_trip() -> Result<(), String> {
        let mut config = RuntimeConfig {
            fuel: true,
            max_wasm_stack: 1 << 20,
            ..RuntimeConfig::default()
        };
        config.compile.limits.max_bytes = 1234;
        let request = Request::parse(flags(&config, config.compile.limits.budget(1234)))?;
        assert!(request.config.fuel && request.config.deadlines);
        assert_eq!(request.config.max_wasm_stack, 1 << 20);
        assert_eq!(request.config.compile.limits.max_bytes, 1234);
        assert_eq!(request.cpu_seconds, 20);
        assert_eq!(request.memory_bytes, 1 << 30);
        assert!(Request::parse(["--bogus=1".to_owned()]).is_err());
        Ok(())
    }
}
