//! The embedded backend: a faithful in-memory Table and Blob service.
