//! [`Importer`]: the one-screen API over the file and store imports.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use transcript_domain::EventMask;
use transcript_providers::Provider;

use crate::store::{StoreDone, import_store_files};
use crate::{ImportContext, ImportError, Imported, Index, Progress, Via, import_all};

/// An agent CLI's session store: its provider and the folders holding its session files
/// (e.g. `~/.claude/projects`; see [`crate::store::default_store`]).
#[derive(Debug, Clone)]
pub struct Store {
    /// Whose store it is (Claude Code, Codex, Gemini CLI or Copilot).
    pub provider: Provider,
    /// The folders read (every session file under them).
    pub dirs: Vec<PathBuf>,
}

/// Imports agent logs into one storage directory (see the crate docs).
pub struct Importer {
    ctx: ImportContext,
}

impl Importer {
    /// An importer writing into `storage` (created when missing), with the system clock and
    /// random run ids, no mask and no progress callback.
    pub fn new(storage: impl Into<PathBuf>) -> Self {
        Importer {
            ctx: ImportContext {
                storage: storage.into(),
                provider: None,
                mask: None,
                deterministic: false,
                progress: None,
            },
        }
    }

    /// Masks every event before it is written (e.g. `transcript-redact`'s redactor).
    pub fn with_mask(mut self, mask: Arc<dyn EventMask>) -> Self {
        self.ctx.mask = Some(mask);
        self
    }

    /// Sends progress notices to `progress`.
    pub fn with_progress(mut self, progress: Progress) -> Self {
        self.ctx.progress = Some(progress);
        self
    }

    /// Sequential run ids and a stepping clock from a fixed start (byte-stable goldens).
    pub fn deterministic(mut self, on: bool) -> Self {
        self.ctx.deterministic = on;
        self
    }

    /// The storage directory.
    pub fn storage(&self) -> &Path {
        &self.ctx.storage
    }

    /// Imports one capture as a new run (`None`: the provider is detected from its head).
    pub fn import_file(
        &self,
        path: &Path,
        provider: Option<Provider>,
    ) -> Result<Imported, ImportError> {
        let (mut done, mut failed) =
            self.import_files(std::slice::from_ref(&path.to_path_buf()), provider);
        match (done.pop(), failed.pop()) {
            (_, Some(e)) => Err(e),
            (Some(run), None) => Ok(run),
            (None, None) => Err(ImportError::file(path, "nothing imported")),
        }
    }

    /// Imports each capture as a new run: the runs written (durable, in input order) and
    /// the inputs that were not imported.
    pub fn import_files(
        &self,
        paths: &[PathBuf],
        provider: Option<Provider>,
    ) -> (Vec<Imported>, Vec<ImportError>) {
        let ctx = ImportContext {
            provider,
            ..self.context()
        };
        import_all(&ctx, paths, Via::Bulk)
    }

    /// Imports a session store incrementally (session files modified since `since`, seconds
    /// since the epoch, or all): unchanged files are skipped, grown ones appended to their
    /// run, new ones imported, and the storage's [`Index`] saved. One [`StoreDone`] per
    /// session file, in file order; a file's fault is its own, the others are imported.
    pub fn import_store(
        &self,
        store: &Store,
        since: Option<i64>,
    ) -> Result<Vec<StoreDone>, ImportError> {
        let mut index = Index::load(&self.ctx.storage)?;
        let done = self.import_store_with(store, since, &index)?;
        if index.record(&done) {
            index.save(&self.ctx.storage)?;
        }
        Ok(done)
    }

    /// [`Importer::import_store`] against an index the caller loaded, which is not saved
    /// (the caller records the outcomes with [`Index::record`] and saves it).
    pub fn import_store_with(
        &self,
        store: &Store,
        since: Option<i64>,
        index: &Index,
    ) -> Result<Vec<StoreDone>, ImportError> {
        // Every root is checked before anything is imported: a missing one must not leave
        // runs written that the index does not know (they would be imported again as new).
        if let Some(dir) = store.dirs.iter().find(|d| !d.is_dir()) {
            return Err(ImportError::NotFound {
                what: format!("{} session store", store.provider),
                path: dir.clone(),
            });
        }
        let ctx = ImportContext {
            provider: Some(store.provider),
            ..self.context()
        };
        Ok(import_store_files(
            &ctx,
            store.provider,
            &store.dirs,
            since,
            index,
            Via::Bulk,
        ))
    }

    fn context(&self) -> ImportContext {
        ImportContext {
            storage: self.ctx.storage.clone(),
            provider: self.ctx.provider,
            mask: self.ctx.mask.clone(),
            deterministic: self.ctx.deterministic,
            progress: self.ctx.progress.clone(),
        }
    }
}

impl From<ImportContext> for Importer {
    /// An importer with these settings (its `provider` is the default of
    /// [`Importer::import_files`]' callers that pass none).
    fn from(ctx: ImportContext) -> Self {
        Importer { ctx }
    }
}
