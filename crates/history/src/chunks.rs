//! A block's column chunks as the Parquet reader reads them, with the pages decompressed by a
//! zstd context that each reading thread keeps ([`ThreadPages`]).
//!
//! The `parquet` crate's page reader makes a codec per column chunk, and its zstd codec makes
//! a compressor beside the decompressor: two contexts allocated and freed per column chunk,
//! each asking the CPU for its features (`cpuid`, which traps to the hypervisor under KVM, 5–10
//! µs a time). A per-series MAX reads 220 column chunks, a one-hour COUNT as many. Here the
//! page reader is told the chunk is uncompressed, so it hands on each page's bytes as they are
//! stored, and [`ThreadPages`] decompresses them with the thread's own context, made once.
//! Pages the row selection skips are skipped before they are decompressed, as before.

use bytes::Bytes;
use parquet::arrow::arrow_reader::RowGroups;
use parquet::basic::Compression;
use parquet::column::page::{Page, PageIterator, PageMetadata, PageReader};
use parquet::errors::{ParquetError, Result};
use parquet::file::metadata::{ParquetMetaData, RowGroupMetaData};
use parquet::file::reader::ChunkReader;
use parquet::file::serialized_reader::SerializedPageReader;
use std::cell::RefCell;
use std::sync::Arc;

thread_local! {
    /// This thread's zstd decompression context, made when first needed.
    static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { RefCell::new(None) };
}

/// One block (row group) of a file, for [`parquet::arrow::arrow_reader::ParquetRecordBatchReader::try_new_with_row_groups`].
pub(crate) struct BlockChunks<R: ChunkReader> {
    pub reader: Arc<R>,
    pub metadata: Arc<ParquetMetaData>,
    pub index: usize,
}

impl<R: ChunkReader + 'static> RowGroups for BlockChunks<R> {
    fn num_rows(&self) -> usize {
        self.metadata.row_group(self.index).num_rows().max(0) as usize
    }

    fn column_chunks(&self, column: usize) -> Result<Box<dyn PageIterator>> {
        let row_group = self.metadata.row_group(self.index);
        let chunk = row_group.column(column);
        let locations = self
            .metadata
            .page_index()
            .and_then(|index| index.page_locations(self.index, column).cloned());
        let rows = row_group.num_rows().max(0) as usize;
        let reader: Box<dyn PageReader> = match chunk.compression() {
            Compression::ZSTD(_) => {
                // told uncompressed, the reader makes no codec and hands on the stored bytes
                let stored =
                    chunk.clone().into_builder().set_compression(Compression::UNCOMPRESSED);
                let stored = stored.build()?;
                let inner =
                    SerializedPageReader::new(self.reader.clone(), &stored, rows, locations)?;
                Box::new(ThreadPages { inner })
            }
            _ => Box::new(SerializedPageReader::new(self.reader.clone(), chunk, rows, locations)?),
        };
        Ok(Box::new(OneChunk(Some(reader))))
    }

    fn row_groups(&self) -> Box<dyn Iterator<Item = &RowGroupMetaData> + '_> {
        Box::new(std::iter::once(self.metadata.row_group(self.index)))
    }

    fn metadata(&self) -> &ParquetMetaData {
        &self.metadata
    }
}

/// The page reader of the one column chunk of a block.
struct OneChunk(Option<Box<dyn PageReader>>);

impl Iterator for OneChunk {
    type Item = Result<Box<dyn PageReader>>;

    fn next(&mut self) -> Option<Self::Item> {
        self.0.take().map(Ok)
    }
}

impl PageIterator for OneChunk {}

/// The pages of a zstd column chunk read as stored, decompressed with the thread's context.
struct ThreadPages<R: ChunkReader> {
    inner: SerializedPageReader<R>,
}

impl<R: ChunkReader> Iterator for ThreadPages<R> {
    type Item = Result<Page>;

    fn next(&mut self) -> Option<Self::Item> {
        self.get_next_page().transpose()
    }
}

impl<R: ChunkReader> PageReader for ThreadPages<R> {
    fn get_next_page(&mut self) -> Result<Option<Page>> {
        self.inner.get_next_page()?.map(decompress).transpose()
    }

    fn peek_next_page(&mut self) -> Result<Option<PageMetadata>> {
        self.inner.peek_next_page()
    }

    fn skip_next_page(&mut self) -> Result<()> {
        self.inner.skip_next_page()
    }

    fn supports_deferred_dictionary(&self) -> bool {
        self.inner.supports_deferred_dictionary()
    }

    fn take_deferred_dictionary(&mut self) -> Result<Option<Page>> {
        self.inner.take_deferred_dictionary()?.map(decompress).transpose()
    }

    fn at_record_boundary(&mut self) -> Result<bool> {
        self.inner.at_record_boundary()
    }
}

/// A page as stored in a zstd chunk, decompressed: a data page of format v2 keeps its levels
/// (stored uncompressed) ahead of its values.
fn decompress(mut page: Page) -> Result<Page> {
    match &mut page {
        Page::DictionaryPage { buf, .. } | Page::DataPage { buf, .. } => *buf = unzstd(buf, 0)?,
        Page::DataPageV2 {
            buf, def_levels_byte_len, rep_levels_byte_len, is_compressed, ..
        } => {
            let levels =
                (*def_levels_byte_len as usize).saturating_add(*rep_levels_byte_len as usize);
            if levels > buf.len() {
                return Err(ParquetError::General("Invalid page header".into()));
            }
            // an empty rest is a page with no non-null values, stored as nothing
            if *is_compressed && buf.len() > levels {
                *buf = unzstd(buf, levels)?;
            }
            *is_compressed = false;
        }
    }
    Ok(page)
}

/// `stored[..keep]` as it is, followed by the zstd frame `stored[keep..]` decompressed.
fn unzstd(stored: &[u8], keep: usize) -> Result<Bytes> {
    let frame = &stored[keep..];
    let size = zstd::zstd_safe::get_frame_content_size(frame)
        .ok()
        .flatten()
        .and_then(|size| usize::try_from(size).ok());
    let Some(size) = size else {
        // a frame that does not say its size (another writer's): streamed
        let mut out = stored[..keep].to_vec();
        out.extend(zstd::stream::decode_all(frame)?);
        return Ok(Bytes::from(out));
    };
    let mut out = Vec::with_capacity(keep + size);
    out.extend_from_slice(&stored[..keep]);
    DECOMPRESSOR.with(|cell| -> Result<()> {
        let mut slot = cell.borrow_mut();
        let decompressor = match slot.as_mut() {
            Some(decompressor) => decompressor,
            None => slot.insert(zstd::bulk::Decompressor::new()?),
        };
        let mut cursor = std::io::Cursor::new(&mut out);
        cursor.set_position(keep as u64);
        decompressor.decompress_to_buffer(frame, &mut cursor)?;
        Ok(())
    })?;
    if out.len() != keep + size {
        return Err(ParquetError::General(format!(
            "a zstd page decompressed to {} bytes, not {}",
            out.len() - keep,
            size
        )));
    }
    Ok(Bytes::from(out))
}
