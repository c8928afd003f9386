//! Feeding a provider normalizer from a capture file: its already-read head first, then the
//! rest of the file in chunks of [`CHUNK`] bytes, then the normalizer's finish. One home for
//! the read loop that both `import` and `import --store` drive.

use std::io::Read;

use transcript_providers::{Item, Normalizer, Provider};

use super::CHUNK;

/// The normalized items of a file, one chunk at a time.
pub struct ChunkFeed {
    normalizer: Box<dyn Normalizer>,
    file: std::fs::File,
    head: Option<Vec<u8>>,
    chunk: Vec<u8>,
}

/// What one [`ChunkFeed::next`] call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fed {
    /// A chunk was normalized; more follows.
    More,
    /// The file ended and the normalizer finished: `before_finish` of the items handed out
    /// this time came before the finish (the rest are what the finish flushed).
    Last {
        /// Items appended by the last chunk's feeding, before the finish.
        before_finish: usize,
    },
}

impl ChunkFeed {
    /// A feed of `provider`'s normalizer over `head`, then the rest of `file`.
    pub fn new(provider: Provider, head: Vec<u8>, file: std::fs::File) -> Self {
        Self {
            normalizer: provider.normalizer(),
            file,
            head: Some(head),
            chunk: vec![0u8; CHUNK],
        }
    }

    /// Appends the next chunk's items to `items` (the head first; at the end of the file,
    /// what the normalizer's finish flushes).
    pub fn next(&mut self, items: &mut Vec<Item>) -> std::io::Result<Fed> {
        if let Some(head) = self.head.take() {
            self.normalizer.feed_items(&head, items);
            return Ok(Fed::More);
        }
        match self.file.read(&mut self.chunk)? {
            0 => {
                let before_finish = items.len();
                self.normalizer.finish_items(items);
                Ok(Fed::Last { before_finish })
            }
            n => {
                self.normalizer.feed_items(&self.chunk[..n], items);
                Ok(Fed::More)
            }
        }
    }
}
