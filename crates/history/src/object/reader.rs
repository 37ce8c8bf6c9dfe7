//! A part's object read as Parquet reads a file: [`RemoteObject`] is a `ChunkReader` whose
//! ranges come through the store's [`Cache`] (aligned chunks, fetched once), and
//! [`PartFile`] is what a part's reads open: its local file when this machine has it, its
//! object otherwise.

use crate::object::cache::{Cache, CHUNK_BYTES};
use crate::object::Bucket;
use bytes::Bytes;
use parquet::errors::ParquetError;
use parquet::file::reader::{ChunkReader, Length};
use std::io::{BufReader, Read};
use std::sync::Arc;

/// One object of a store, of a known size.
#[derive(Debug, Clone)]
pub struct RemoteObject {
    pub bucket: Arc<Bucket>,
    pub cache: Arc<Cache>,
    /// Its key under the store's prefix (`p=<start>/part-….parquet`).
    pub key: String,
    pub size: u64,
}

impl RemoteObject {
    fn bytes(&self, start: u64, length: usize) -> Result<Bytes, ParquetError> {
        self.cache
            .read(&self.bucket, &self.key, self.size, start, length)
            .map_err(|e| ParquetError::External(Box::new(e)))
    }
}

impl Length for RemoteObject {
    fn len(&self) -> u64 {
        self.size
    }
}

impl ChunkReader for RemoteObject {
    type T = RemoteRead;

    fn get_read(&self, start: u64) -> Result<RemoteRead, ParquetError> {
        Ok(RemoteRead { object: self.clone(), position: start, chunk: Bytes::new(), offset: 0 })
    }

    fn get_bytes(&self, start: u64, length: usize) -> Result<Bytes, ParquetError> {
        self.bytes(start, length)
    }
}

/// A sequential reader of an object from a position, a chunk at a time (page headers are
/// read a few bytes at a time).
pub struct RemoteRead {
    object: RemoteObject,
    position: u64,
    chunk: Bytes,
    offset: usize,
}

impl Read for RemoteRead {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.offset >= self.chunk.len() {
            if self.position >= self.object.size || buf.is_empty() {
                return Ok(0);
            }
            // to the end of the position's chunk: one chunk, from the cache once fetched
            let chunk_end = (self.position / CHUNK_BYTES + 1) * CHUNK_BYTES;
            let length = (chunk_end.min(self.object.size) - self.position) as usize;
            self.chunk = self.object.bytes(self.position, length).map_err(std::io::Error::other)?;
            self.offset = 0;
        }
        let n = buf.len().min(self.chunk.len() - self.offset);
        buf[..n].copy_from_slice(&self.chunk[self.offset..self.offset + n]);
        self.offset += n;
        self.position += n as u64;
        Ok(n)
    }
}

/// What a part's reads open: its local file, or its object.
pub enum PartFile {
    Local(std::fs::File),
    Remote(RemoteObject),
}

/// A reader of a [`PartFile`] from a position.
pub enum PartRead {
    Local(BufReader<std::fs::File>),
    Remote(RemoteRead),
}

impl Read for PartRead {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            PartRead::Local(r) => r.read(buf),
            PartRead::Remote(r) => r.read(buf),
        }
    }
}

impl Length for PartFile {
    fn len(&self) -> u64 {
        match self {
            PartFile::Local(f) => Length::len(f),
            PartFile::Remote(o) => o.size,
        }
    }
}

impl ChunkReader for PartFile {
    type T = PartRead;

    fn get_read(&self, start: u64) -> Result<PartRead, ParquetError> {
        match self {
            PartFile::Local(f) => f.get_read(start).map(PartRead::Local),
            PartFile::Remote(o) => o.get_read(start).map(PartRead::Remote),
        }
    }

    fn get_bytes(&self, start: u64, length: usize) -> Result<Bytes, ParquetError> {
        match self {
            PartFile::Local(f) => f.get_bytes(start, length),
            PartFile::Remote(o) => o.get_bytes(start, length),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::ObjectStoreOptions;

    #[test]
    fn a_sequential_read_gives_the_object_from_its_position() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}", dir.path().join("b").display());
        let bucket = Arc::new(Bucket::open(&url, &ObjectStoreOptions::default()).unwrap());
        let data: Vec<u8> = (0..(CHUNK_BYTES * 2 + 33)).map(|i| (i % 97) as u8).collect();
        bucket.put("o", Bytes::from(data.clone())).unwrap();
        let cache = Arc::new(Cache::open(&dir.path().join("c"), 1 << 30).unwrap());
        let object = RemoteObject { bucket, cache, key: "o".into(), size: data.len() as u64 };
        let mut read = object.get_read(10).unwrap();
        let mut got = Vec::new();
        read.read_to_end(&mut got).unwrap();
        assert_eq!(got, &data[10..]);
        assert_eq!(object.get_bytes(5, 3).unwrap(), &data[5..8]);
    }
}
