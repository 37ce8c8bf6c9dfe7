//! The SQL catalog of a local store's Iceberg table: a SQLite file beside the store
//! (`DIR/catalog.db`) holding the tables of Iceberg's JDBC catalog, so pyiceberg's
//! `SqlCatalog` and Spark's `JdbcCatalog` find the table by name (`needle.history`) and load
//! its newest metadata file. needle points the table at each version it commits.
//!
//! The catalog is `needle`; the tables are the JDBC catalog's (`iceberg_tables` with the
//! `iceberg_type` column of its schema V1, `iceberg_namespace_properties`), created when
//! missing.

use crate::HistoryError;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The catalog's name in the JDBC catalog's rows (pyiceberg's `SqlCatalog("needle", ...)`).
pub const CATALOG: &str = "needle";
/// The namespace and name of the store's table.
pub const NAMESPACE: &str = "needle";
pub const TABLE: &str = "history";
/// The catalog's file in the store's directory.
pub const FILE: &str = "catalog.db";

/// A store's SQL catalog, open.
pub struct SqlCatalog {
    path: PathBuf,
    connection: Mutex<rusqlite::Connection>,
}

impl SqlCatalog {
    /// Opens (creating it and its tables when missing) the catalog in `dir`.
    pub fn open(dir: &Path) -> Result<SqlCatalog, HistoryError> {
        let path = dir.join(FILE);
        let error = |e: rusqlite::Error| HistoryError::Catalog {
            path: path.clone(),
            message: e.to_string(),
        };
        let connection = rusqlite::Connection::open(&path).map_err(error)?;
        connection.busy_timeout(std::time::Duration::from_secs(5)).map_err(error)?;
        connection
            .execute_batch(
                "CREATE TABLE IF NOT EXISTS iceberg_tables (
                    catalog_name VARCHAR(255) NOT NULL,
                    table_namespace VARCHAR(255) NOT NULL,
                    table_name VARCHAR(255) NOT NULL,
                    metadata_location VARCHAR(1000),
                    previous_metadata_location VARCHAR(1000),
                    iceberg_type VARCHAR(5),
                    PRIMARY KEY (catalog_name, table_namespace, table_name));
                 CREATE TABLE IF NOT EXISTS iceberg_namespace_properties (
                    catalog_name VARCHAR(255) NOT NULL,
                    namespace VARCHAR(255) NOT NULL,
                    property_key VARCHAR(255),
                    property_value VARCHAR(1000),
                    PRIMARY KEY (catalog_name, namespace, property_key));",
            )
            .map_err(error)?;
        connection
            .execute(
                "INSERT OR IGNORE INTO iceberg_namespace_properties
                 (catalog_name, namespace, property_key, property_value) VALUES (?1, ?2, 'exists', 'true')",
                [CATALOG, NAMESPACE],
            )
            .map_err(error)?;
        Ok(SqlCatalog { path, connection: Mutex::new(connection) })
    }

    /// Points the table at `metadata` (a metadata file's URI), the one it pointed at before
    /// becoming its previous.
    pub fn point(&self, metadata: &str) -> Result<(), HistoryError> {
        let connection = self.connection.lock().unwrap_or_else(|e| e.into_inner());
        connection
            .execute(
                "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name,
                    metadata_location, previous_metadata_location, iceberg_type)
                 VALUES (?1, ?2, ?3, ?4, NULL, 'TABLE')
                 ON CONFLICT (catalog_name, table_namespace, table_name) DO UPDATE SET
                    previous_metadata_location = iceberg_tables.metadata_location,
                    metadata_location = excluded.metadata_location
                 WHERE iceberg_tables.metadata_location IS NOT excluded.metadata_location",
                [CATALOG, NAMESPACE, TABLE, metadata],
            )
            .map_err(|e| HistoryError::Catalog {
                path: self.path.clone(),
                message: e.to_string(),
            })?;
        Ok(())
    }

    /// The metadata file the table points at, if any.
    pub fn current(&self) -> Result<Option<String>, HistoryError> {
        let connection = self.connection.lock().unwrap_or_else(|e| e.into_inner());
        let found = connection.query_row(
            "SELECT metadata_location FROM iceberg_tables
             WHERE catalog_name = ?1 AND table_namespace = ?2 AND table_name = ?3",
            [CATALOG, NAMESPACE, TABLE],
            |row| row.get::<_, Option<String>>(0),
        );
        match found {
            Ok(location) => Ok(location),
            Err(rusqlite::Error::QueryReturnedNoRows) => Ok(None),
            Err(e) => {
                Err(HistoryError::Catalog { path: self.path.clone(), message: e.to_string() })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_points_at_the_newest_metadata_and_remembers_the_one_before() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = SqlCatalog::open(dir.path()).unwrap();
        assert_eq!(catalog.current().unwrap(), None);
        catalog.point("file:///s/metadata/v1.metadata.json").unwrap();
        catalog.point("file:///s/metadata/v2.metadata.json").unwrap();
        drop(catalog);
        let again = SqlCatalog::open(dir.path()).unwrap();
        assert_eq!(
            again.current().unwrap().as_deref(),
            Some("file:///s/metadata/v2.metadata.json")
        );
        let connection = again.connection.lock().unwrap();
        let previous: String = connection
            .query_row("SELECT previous_metadata_location FROM iceberg_tables", [], |r| r.get(0))
            .unwrap();
        assert_eq!(previous, "file:///s/metadata/v1.metadata.json");
    }
}
