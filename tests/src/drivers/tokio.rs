//! The tokio driver: scenarios on [`spillguard_tokio::Host`], an owner task
//! per call on a multi-threaded runtime made for the run.
//!
//! The clients are plain threads, as for every runtime; each async method
//! of the handle is driven with the runtime's `block_on`.

use std::time::Duration;

use spillguard_core::{
    ApprovalCard, CallError, CallRecord, Config, DebugGrant, DebugGrantError, Outcome,
    RetentionPool, State,
};
use spillguard_host::{CallRequest, Launch};
use spillguard_tokio::{CallHandle, Host, HostOptions, ShutdownReport};
use tokio::runtime::{Handle, Runtime};
use tokio::sync::oneshot;

use crate::audit::ScenarioLog;
use crate::engine::{self, CallUnderTest, DefaultCall, HostUnderTest, Streams};
use crate::measure::Measured;
use crate::scenario::{Environment, Scenario};

/// The name of this runtime in reports.
pub const NAME: &str = "tokio";

/// Worker threads of the run's runtime: the machine's two cores.
const WORKERS: usize = 2;

/// Runs `scenario` on a fresh tokio [`Host`] and its own runtime, with
/// its audit log (S10).
pub fn run(scenario: &Scenario, env: &Environment) -> Measured {
    let log = ScenarioLog::create(NAME, scenario);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => return log.finish(engine::refused(NAME, scenario, &error.to_string())),
    };
    let options = HostOptions {
        audit: log.sink(),
        ..super::std::options(&scenario.host)
    };
    let measured = match Host::with_runtime(
        scenario.host.config.clone(),
        options,
        runtime.handle().clone(),
    ) {
        Ok(host) => engine::run(
            NAME,
            TokioHost {
                host,
                runtime: Driven::Workers(runtime),
            },
            scenario,
            env,
        ),
        Err(error) => engine::refused(NAME, scenario, &error.to_string()),
    };
    log.finish(measured)
}

/// A tokio host with the default config and `options` on its own
/// multi-threaded runtime, for the behaviour checks ([`crate::behaviour`]).
///
/// # Panics
///
/// If the runtime cannot be built or the default config is refused.
pub fn host(options: HostOptions) -> TokioHost {
    // Each check measures its own host's pool, while others run beside it.
    let options = HostOptions {
        own_retention_pool: true,
        ..options
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let host = Host::with_runtime(Config::default(), options, runtime.handle().clone())
        .expect("the default config is valid");
    TokioHost {
        host,
        runtime: Driven::Workers(runtime),
    }
}

/// A tokio host with the default config and `options` on a current-thread
/// runtime, driven by one thread of its own: every owner (and the reads it
/// makes), waiter and timer shares that thread, so a flood read there must
/// not postpone a deadline.
///
/// # Panics
///
/// If the runtime or its thread cannot be made, or the default config is
/// refused.
pub fn current_thread_host(options: HostOptions) -> TokioHost {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let handle = runtime.handle().clone();
    let (stop, stopped) = oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("tokio-current-thread".into())
        .spawn(move || {
            let _ = runtime.block_on(stopped);
        })
        .expect("the runtime's thread");
    let host = Host::with_runtime(Config::default(), options, handle.clone())
        .expect("the default config is valid");
    TokioHost {
        host,
        runtime: Driven::OneThread {
            handle,
            stop: Some(stop),
            thread: Some(thread),
        },
    }
}

/// A tokio [`Host`] under test, with the runtime its calls run on.
#[derive(Debug)]
pub struct TokioHost {
    host: Host,
    runtime: Driven,
}

/// The runtime of a [`TokioHost`] and what drives it.
#[derive(Debug)]
enum Driven {
    /// A multi-threaded runtime: its workers drive it.
    Workers(Runtime),
    /// A current-thread runtime inside `block_on` on its own thread until
    /// `stop` is sent (or dropped).
    OneThread {
        handle: Handle,
        stop: Option<oneshot::Sender<()>>,
        thread: Option<std::thread::JoinHandle<()>>,
    },
}

impl Driven {
    fn handle(&self) -> &Handle {
        match self {
            Driven::Workers(runtime) => runtime.handle(),
            Driven::OneThread { handle, .. } => handle,
        }
    }
}

impl Drop for Driven {
    fn drop(&mut self) {
        if let Driven::OneThread { stop, thread, .. } = self {
            drop(stop.take());
            if let Some(thread) = thread.take() {
                let _ = thread.join();
            }
        }
    }
}

impl HostUnderTest for TokioHost {
    type Call = TokioCall;

    fn launch(&self, request: CallRequest) -> TokioCall {
        TokioCall {
            handle: Launch::launch(&self.host, request),
            runtime: self.runtime.handle().clone(),
        }
    }

    fn grant_debug(
        &self,
        duration: Duration,
        per_call_bytes: u64,
    ) -> Result<DebugGrant, DebugGrantError> {
        self.host.grant_debug(duration, per_call_bytes)
    }

    fn revoke_debug(&self) {
        self.host.revoke_debug();
    }

    fn default_output(&self, call: &DefaultCall) -> std::io::Result<spillguard_host::Output> {
        // A runtime of the call's own, gone after it: the process-wide
        // host's calls do not run on it.
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
            .block_on(
                call.describe(spillguard_tokio::Command::on_default)
                    .output(),
            )
    }

    fn drop_host(self) -> Box<dyn Send> {
        let TokioHost { host, runtime } = self;
        drop(host);
        Box::new(runtime)
    }

    fn pool(&self) -> RetentionPool {
        self.host.pool().clone()
    }

    fn finished_records(&self) -> Vec<CallRecord> {
        self.host.finished_records()
    }

    fn live_calls(&self) -> usize {
        self.host.live_calls()
    }

    fn shutdown_now(&self) -> usize {
        self.host.shutdown()
    }

    fn shutdown(&self, timeout: Duration) -> ShutdownReport {
        self.runtime
            .handle()
            .block_on(self.host.shutdown_and_wait(timeout))
    }

    fn audit_failures(&self) -> u64 {
        self.host.audit_failures()
    }

    fn leftover_pipes(&self) -> spillguard_host::LeftoverStats {
        self.host.leftover_pipes()
    }
}

/// A tokio [`CallHandle`] and the runtime that drives its async methods.
#[derive(Debug)]
pub struct TokioCall {
    handle: CallHandle,
    runtime: Handle,
}

impl CallUnderTest for TokioCall {
    fn state(&self) -> State {
        self.handle.state()
    }

    fn wait_card(&self, timeout: Duration) -> Option<ApprovalCard> {
        self.runtime.block_on(self.handle.wait_card(timeout))
    }

    fn card(&self) -> Option<ApprovalCard> {
        self.handle.card()
    }

    fn approve(&self) -> Result<(), CallError> {
        self.runtime.block_on(self.handle.approve())
    }

    fn deny(&self) -> Result<(), CallError> {
        self.runtime.block_on(self.handle.deny())
    }

    fn id(&self) -> Option<u32> {
        self.handle.id()
    }

    fn cancel(&self) {
        self.handle.cancel();
    }

    fn wait_timeout(self, timeout: Duration) -> Result<Outcome, Self> {
        let TokioCall { handle, runtime } = self;
        match runtime.block_on(handle.wait_timeout(timeout)) {
            Ok(outcome) => Ok(outcome),
            Err(handle) => Err(TokioCall { handle, runtime }),
        }
    }

    fn try_outcome(self) -> Result<Outcome, Self> {
        let TokioCall { handle, runtime } = self;
        handle
            .try_outcome()
            .map_err(|handle| TokioCall { handle, runtime })
    }

    fn streams(&self) -> std::io::Result<Streams> {
        let (stdin, stdout) = self.runtime.block_on(self.handle.streams())?;
        let runtime = self.runtime.clone();
        let stdin = OnRuntime {
            runtime: runtime.clone(),
            inner: stdin,
        };
        let stdout = OnRuntime {
            runtime,
            inner: stdout,
        };
        Ok((Box::new(stdin), Box::new(stdout)))
    }
}

/// An async stream driven by `runtime`'s `block_on`, as a std stream.
struct OnRuntime<T> {
    runtime: Handle,
    inner: T,
}

impl std::io::Write for OnRuntime<spillguard_tokio::HelperStdin> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        use tokio::io::AsyncWriteExt;
        self.runtime.block_on(self.inner.write(buf))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        use tokio::io::AsyncWriteExt;
        self.runtime.block_on(self.inner.flush())
    }
}

impl std::io::Read for OnRuntime<spillguard_tokio::HelperStdout> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use tokio::io::AsyncReadExt;
        self.runtime.block_on(self.inner.read(buf))
    }
}
