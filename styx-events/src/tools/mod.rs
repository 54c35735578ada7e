//! Formats that other tools of the field load: drcov coverage (Lighthouse,
//! Cartographer, bncov), Tenet traces (Tenet for IDA, its Ghidra importer),
//! and Parquet for SQL engines (DuckDB, pandas/Polars, Spark). Each is an
//! [`crate::writer::EventWriter`] like the others.

pub mod drcov;
pub mod parquet;
pub mod tenet;
