//! The Azure backend: Azure Storage or Azurite through azure_data_tables and
//! azure_storage_blobs 0.21.
