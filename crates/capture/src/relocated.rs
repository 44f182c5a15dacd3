//! A capture relocated to Linux's layout as it runs: QEMU is asked for its
//! page log (`-d page`), which says where it loaded the program, and the
//! trace's events pass through a [`Relocator`].

use crate::elf::ElfImage;
use crate::layout::{exec_strings, ExecRequest, LayoutParams, LinuxLayout};
use crate::relocate::{CapturedImage, Relocator};
use crate::{Backend, Capture, CaptureCommand, CaptureError};
use pagelab_core::{Event, SourceInfo};
use pagelab_trace::{TraceError, TraceSource};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// What relocating a capture needs besides its events: the model's layout
/// of the program and where QEMU's page log is.
#[derive(Debug)]
pub struct RelocationSetup {
    layout: LinuxLayout,
    model: crate::layout::ExecLayout,
    program: ElfImage,
    interp: Option<ElfImage>,
    /// QEMU's log directory (removed with the setup) and the program's pid.
    dir: PathBuf,
    pid: u32,
}

impl Drop for RelocationSetup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Capture {
    /// Starts `cmd` (QEMU only) with QEMU's page log on, and lays its
    /// program out as Linux would (`params`), for [`Relocated`].
    pub fn spawn_relocatable(
        cmd: &CaptureCommand,
        params: LayoutParams,
    ) -> Result<(Capture, RelocationSetup), CaptureError> {
        if cmd.backend != Backend::Qemu {
            return Err(CaptureError::Other(format!(
                "Linux's layout needs the qemu backend (the {} backend records no mappings)",
                cmd.backend
            )));
        }
        let program = crate::tools::which(&cmd.program)
            .ok_or_else(|| CaptureError::NoProgram(cmd.program.to_string_lossy().into_owned()))?;
        let (argv0, file, args) = crate::script::resolve_script(&program, &cmd.args)?;
        let elf =
            |p: &std::path::Path| ElfImage::read(p).map_err(|e| CaptureError::Other(e.to_string()));
        let exe = elf(&file)?;
        let interp = exe.interp.as_deref().map(elf).transpose()?;
        // The strings execve copies: the file name, the arguments, the environment.
        let argv: Vec<OsString> = std::iter::once(argv0).chain(args).collect();
        let env: Vec<Vec<u8>> = std::env::vars_os()
            .map(|(k, v)| {
                let mut e = k.as_bytes().to_vec();
                e.push(b'=');
                e.extend_from_slice(v.as_bytes());
                e
            })
            .collect();
        let strings = exec_strings(
            file.as_os_str().as_bytes(),
            argv.iter().map(|a| a.as_bytes()),
            env.iter().map(|e| e.as_slice()),
        );
        let req = ExecRequest {
            program: &exe,
            interp: interp.as_ref(),
            strings,
        };
        let (layout, model) = LinuxLayout::exec(params, &req).map_err(|e| {
            CaptureError::Other(format!("Linux's layout of {}: {e}", file.display()))
        })?;
        let dir = std::env::temp_dir().join(format!(
            "pagelab-layout-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        std::fs::create_dir_all(&dir)
            .map_err(|e| CaptureError::io(format!("creating {}", dir.display()), e))?;
        let log = dir.join("qemu-%d.log");
        let extra: Vec<OsString> = vec!["-d".into(), "page".into(), "-D".into(), log.into()];
        let capture = match Capture::spawn_with(cmd, &extra) {
            Ok(c) => c,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        let pid = capture.pid();
        Ok((
            capture,
            RelocationSetup {
                layout,
                model,
                program: exe,
                interp,
                dir,
                pid,
            },
        ))
    }
}

/// A source relocated to Linux's layout: `inner`'s events (a capture
/// started by [`Capture::spawn_relocatable`]) through a [`Relocator`].
pub struct Relocated<S> {
    inner: S,
    setup: Option<RelocationSetup>,
    reloc: Option<Relocator>,
    raw: Vec<Event>,
}

impl<S: TraceSource> Relocated<S> {
    /// `inner`, relocated as `setup` says.
    pub fn new(inner: S, setup: RelocationSetup) -> Relocated<S> {
        Relocated {
            inner,
            setup: Some(setup),
            reloc: None,
            raw: Vec::new(),
        }
    }

    /// The source relocated.
    pub fn inner_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    fn error(&self, what: String) -> TraceError {
        TraceError::Other(format!("{}: {what}", self.inner.info().name))
    }

    /// The relocator, made once QEMU has loaded the program (its page log
    /// is written before the program's first instruction runs).
    fn relocator(&mut self) -> Result<&mut Relocator, TraceError> {
        if self.reloc.is_none() {
            let setup = self
                .setup
                .as_ref()
                .expect("set until the relocator is made");
            let log = setup.dir.join(format!("qemu-{}.log", setup.pid));
            let text = std::fs::read_to_string(&log)
                .map_err(|e| self.error(format!("QEMU's page log {}: {e}", log.display())))?;
            let captured =
                CapturedImage::from_qemu_log(&text, &setup.program, setup.interp.as_ref())
                    .map_err(|e| self.error(e))?;
            let setup = self.setup.take().expect("checked above");
            let r = Relocator::new(
                setup.layout.clone(),
                &setup.model,
                setup.interp.as_ref(),
                &captured,
            )
            .map_err(|e| self.error(e.to_string()))?;
            self.reloc = Some(r);
        }
        Ok(self.reloc.as_mut().expect("made above"))
    }
}

impl<S: TraceSource> TraceSource for Relocated<S> {
    fn fill(&mut self, out: &mut Vec<Event>, max: usize) -> Result<bool, TraceError> {
        let mut raw = std::mem::take(&mut self.raw);
        raw.clear();
        let more = self.inner.fill(&mut raw, max)?;
        if more {
            let name = self.inner.info().name;
            let reloc = self.relocator()?;
            for ev in raw.drain(..) {
                reloc
                    .apply(ev, out)
                    .map_err(|e| TraceError::Other(format!("{name}: relocating to Linux's layout: {e} (--layout captured models the captured addresses)")))?;
            }
        }
        self.raw = raw;
        Ok(more)
    }

    fn info(&self) -> SourceInfo {
        let mut info = self.inner.info();
        info.params.insert("layout".into(), "linux".into());
        info
    }
}
