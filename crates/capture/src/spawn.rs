//! Running a program under a backend with its trace coming back through a pipe.

use crate::tools::{self, CaptureError};
use crate::valgrind::{Lives, Segment, Stream};
use crate::PluginReader;
use pagelab_core::Event;
use pagelab_trace::{LackeyReader, TraceError};
use std::ffi::OsString;
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::str::FromStr;

mod source;

/// How a program is captured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Backend {
    /// QEMU user-mode emulation with pagelab's TCG plugin: references,
    /// processes, threads and address-space system calls.
    #[default]
    Qemu,
    /// Valgrind Lackey through a pipe: references only.
    Valgrind,
}

impl FromStr for Backend {
    type Err = CaptureError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "qemu" => Ok(Backend::Qemu),
            "valgrind" | "lackey" => Ok(Backend::Valgrind),
            _ => Err(CaptureError::Other(format!(
                "unknown backend `{s}`: valid backends are `qemu` and `valgrind`"
            ))),
        }
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backend::Qemu => "qemu",
            Backend::Valgrind => "valgrind",
        })
    }
}

/// What to capture and how.
#[derive(Clone, Debug, Default)]
pub struct CaptureCommand {
    /// The backend.
    pub backend: Backend,
    /// The program (looked up in PATH unless it holds a slash).
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Where the program's standard output goes.
    pub stdout: StdoutTo,
}

/// Where a captured program's standard output goes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum StdoutTo {
    /// pagelab's standard output.
    #[default]
    Inherit,
    /// pagelab's standard error (when pagelab's standard output carries the trace).
    Stderr,
    /// A file, created or truncated.
    File(std::path::PathBuf),
}

/// Which of SIGINT, SIGTERM, SIGHUP or SIGQUIT (the first, its number) arrived while a capture
/// ran, if one did (they are held by [`pagelab_sys::signals`], shared with the lab, and passed
/// on to the captured program).
pub fn interrupted() -> Option<i32> {
    pagelab_sys::signals::received()
}

/// The plugin's stream: the pipe, then what the arena holds once the pipe ends.
struct PluginInput {
    pipe: File,
    arena: Option<File>,
    rest: std::io::Cursor<Vec<u8>>,
}

impl std::io::Read for PluginInput {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if let Some(arena) = &self.arena {
            match self.pipe.read(buf)? {
                0 => {
                    self.rest = std::io::Cursor::new(crate::arena::leftovers(arena)?);
                    self.arena = None;
                }
                n => return Ok(n),
            }
        }
        self.rest.read(buf)
    }
}

enum Reader {
    Qemu(Box<PluginReader<PluginInput>>),
    Lackey(Box<LackeyReader<Segment>>, Valgrind),
}

/// The Valgrind stream's segments and the processes its markers name.
struct Valgrind {
    stream: Stream,
    lives: Lives,
}

/// A running capture: a [`TraceSource`](pagelab_trace::TraceSource) of the program's
/// events, read from a pipe as the program runs.
///
/// The program runs in a process group of its own; SIGINT, SIGTERM and SIGHUP
/// sent to pagelab are forwarded to that group (a second one kills it), and
/// the backend dies with pagelab. At the end of the stream the program is
/// waited for, and an exit event is added for it when the trace lacks one (it
/// was killed by a signal, or the backend records no system calls): its exit
/// code, or 128 plus the signal number. Dropping a capture that is still
/// running kills its process group.
///
/// Contract: that of [`TraceSource`](pagelab_trace::TraceSource).
pub struct Capture {
    child: Child,
    /// The terminating signals, held (and passed on to the program's group) while it runs.
    held: Option<pagelab_sys::signals::Held>,
    reader: Reader,
    label: String,
    backend: Backend,
    status: Option<ExitStatus>,
    started: bool,
    ended: bool,
    /// Events to deliver after the stream: the exit the trace lacks.
    tail: Vec<Event>,
    /// Whether the stream has held a reference yet: one that ends without
    /// any recorded nothing (the backend failed), an error, not a trace.
    recorded: bool,
    /// The program file starts with `#!`.
    script: bool,
}

/// Descriptor the plugin or Valgrind writes to: high, because the guest shares
/// QEMU's descriptor table and programs close low ones.
fn target_fd() -> i32 {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    let soft = limit.current.map_or(1024, |n| n.min(1024)) as i32;
    soft - 1
}

impl Capture {
    /// Starts `cmd.program` under `cmd.backend`.
    pub fn spawn(cmd: &CaptureCommand) -> Result<Capture, CaptureError> {
        Capture::spawn_with(cmd, "", &[], None)
    }

    /// [`Capture::spawn`] with more arguments for QEMU's plugin (`plugin`,
    /// `,key=value` each) and for the backend, before the program's; with
    /// `place`, the plugin reads placement answers from that pipe and the
    /// decoder sends the questions to its queue (`crate::placement`).
    pub(crate) fn spawn_with(
        cmd: &CaptureCommand,
        plugin: &str,
        backend_args: &[std::ffi::OsString],
        place: Option<(&OwnedFd, crate::placement::Questions)>,
    ) -> Result<Capture, CaptureError> {
        let program = tools::which(&cmd.program)
            .ok_or_else(|| CaptureError::NoProgram(cmd.program.to_string_lossy().into_owned()))?;
        let fd = target_fd();
        let mem_fd = fd - 1;
        let place_fd = fd - 2;
        let mut arena = None;
        let parent = std::process::id();
        let mut command = match cmd.backend {
            Backend::Qemu => {
                let qemu = tools::find_qemu()?;
                let api = tools::plugin_api_for(tools::qemu_version(&qemu)?);
                let lib = tools::plugin_path(api)?;
                arena = Some(crate::arena::create()?);
                let mut c = Command::new(qemu);
                let mut arg = lib.into_os_string();
                arg.push(format!(",fd={fd},mem={mem_fd}{plugin}"));
                if place.is_some() {
                    arg.push(format!(",place={place_fd}"));
                }
                c.arg("-plugin").arg(arg).args(backend_args);
                c
            }
            Backend::Valgrind => {
                let mut c = Command::new(tools::find_valgrind()?);
                c.args(["--tool=lackey", "--trace-mem=yes", "--trace-children=yes"])
                    .arg(format!("--log-fd={fd}"));
                c
            }
        };
        let script = is_script(&program);
        match cmd.backend {
            // QEMU user mode runs ELF files only: a script's interpreter runs
            // with the script as its argument, as the kernel's binfmt_script
            // does (the plugin does the same for the programs the guest execs).
            Backend::Qemu => {
                let (argv0, file, args) = crate::script::resolve_script(&program, &cmd.args)?;
                command.arg("-0").arg(argv0).arg(file).args(args);
            }
            // Valgrind runs scripts' interpreters itself, and follows execs.
            Backend::Valgrind => {
                command.arg(&program).args(&cmd.args);
            }
        }
        match &cmd.stdout {
            StdoutTo::Inherit => {}
            StdoutTo::Stderr => {
                let err = std::io::stderr()
                    .as_fd_owned()
                    .map_err(|e| CaptureError::io("duplicating standard error", e))?;
                command.stdout(Stdio::from(err));
            }
            StdoutTo::File(p) => {
                let f = File::create(p)
                    .map_err(|e| CaptureError::io(format!("creating {}", p.display()), e))?;
                command.stdout(Stdio::from(f));
            }
        }
        let (read_end, write_end) = pipe()?;
        let w = write_end.as_raw_fd();
        let m = arena.as_ref().map_or(-1, |a| a.as_raw_fd());
        let p = place.as_ref().map_or(-1, |(f, _)| f.as_raw_fd());
        // SAFETY: the closure runs between fork and exec and makes only async-signal-safe
        // system calls (dup2, setpgid, prctl, getppid, kill), on descriptors that stay open
        // in the parent until the child has started (`write_end` and `arena` outlive spawn).
        unsafe {
            command.pre_exec(move || {
                // dup2 leaves the copy without close-on-exec, so the backend inherits it.
                pagelab_sys::process::dup_to(w, fd)?;
                if m >= 0 {
                    pagelab_sys::process::dup_to(m, mem_fd)?;
                }
                if p >= 0 {
                    pagelab_sys::process::dup_to(p, place_fd)?;
                }
                rustix::process::setpgid(None, None)?;
                pagelab_sys::process::die_with_parent(parent)
            });
        }
        let held = pagelab_sys::signals::hold();
        let child = command
            .spawn()
            .map_err(|e| CaptureError::io(format!("starting the {} backend", cmd.backend), e))?;
        // The program runs in a group of its own, which the terminal's Ctrl-C does not reach:
        // the held signals are passed on to it (a second one kills it).
        pagelab_sys::signals::forward_to_group(child.id());
        drop(write_end);
        let input = File::from(read_end);
        let label = std::iter::once(cmd.program.to_string_lossy().into_owned())
            .chain(cmd.args.iter().map(|a| a.to_string_lossy().into_owned()))
            .collect::<Vec<_>>()
            .join(" ");
        let reader = match cmd.backend {
            Backend::Qemu => {
                let mut r = PluginReader::new(
                    PluginInput {
                        pipe: input,
                        arena,
                        rest: Default::default(),
                    },
                    format!("qemu capture of {label}"),
                );
                if let Some((_, q)) = place {
                    r.ask_to(q);
                }
                Reader::Qemu(Box::new(r))
            }
            Backend::Valgrind => {
                let stream = Stream::new(input);
                Reader::Lackey(
                    Box::new(LackeyReader::new(
                        stream.segment(),
                        format!("lackey capture of {label}"),
                    )),
                    Valgrind {
                        stream,
                        lives: Lives::default(),
                    },
                )
            }
        };
        Ok(Capture {
            child,
            held: Some(held),
            reader,
            label,
            backend: cmd.backend,
            status: None,
            started: false,
            ended: false,
            tail: Vec::new(),
            recorded: false,
            script,
        })
    }

    /// The program's process id (the backend's: both run the program in their own process).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The program's exit status, once the stream has ended.
    pub fn status(&self) -> Option<ExitStatus> {
        self.status
    }

    /// Stops the program (its whole process group) if it still runs, and waits for it.
    pub fn stop(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            // Already gone is fine: the wait below collects it.
            let _ = pagelab_sys::process::kill_group(self.child.id(), libc::SIGKILL);
            self.status = self.child.wait().ok();
            self.ended_forwarding();
        }
        self.status
    }

    /// Stops passing signals to the program's group, which is gone (its id may be reused),
    /// and lets the signals go.
    fn ended_forwarding(&mut self) {
        pagelab_sys::signals::stop_forwarding();
        self.held = None;
    }

    /// Waits for the program and returns the exit event the trace lacks, if any.
    fn wait(&mut self) -> Result<Option<Event>, TraceError> {
        let status = self
            .child
            .wait()
            .map_err(|e| TraceError::io(&self.label, e))?;
        self.status = Some(status);
        self.ended_forwarding();
        let pid = self.child.id();
        let recorded = match &self.reader {
            Reader::Qemu(r) => r.exited(pid),
            Reader::Lackey(_, v) => v.lives.exited(pid),
        };
        Ok((!recorded).then(|| Event::Exit {
            status: exit_code(status),
        }))
    }
}

/// Whether the file at `path` starts with `#!`.
fn is_script(path: &std::path::Path) -> bool {
    let mut head = [0u8; 2];
    File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
        .is_ok_and(|()| &head == b"#!")
}

/// An exit status as a shell reports it: the code, or 128 plus the signal.
pub fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

trait AsFdOwned {
    fn as_fd_owned(&self) -> std::io::Result<OwnedFd>;
}

impl AsFdOwned for std::io::Stderr {
    fn as_fd_owned(&self) -> std::io::Result<OwnedFd> {
        use std::os::fd::AsFd;
        self.as_fd().try_clone_to_owned()
    }
}

pub(crate) fn pipe() -> Result<(OwnedFd, OwnedFd), CaptureError> {
    let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| CaptureError::io("creating a pipe", e.into()))?;
    // A larger pipe lets the backend write whole blocks while pagelab is busy
    // (refused above the system's pipe-max-size: then the default stays).
    let _ = rustix::pipe::fcntl_setpipe_size(&w, 1 << 20);
    Ok((r, w))
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.stop();
    }
}
