//! `leasehold tables ...`: list, create and delete the tables under the
//! store's table prefix.

use leasehold::Store;
use leasehold::backend::TableCreation;
use serde_json::json;

use crate::args::TablesCommand;
use crate::failure::Failure;
use crate::output::Output;

/// Runs a `tables` command.
pub(crate) async fn run(
    store: &Store,
    command: TablesCommand,
    out: &Output,
) -> Result<(), Failure> {
    match command {
        TablesCommand::List => {
            let tables = store.list_tables().await?;
            if out.json {
                out!("{}", json!({ "tables": tables }));
            } else if tables.is_empty() {
                out.note("no tables");
            } else {
                for table in tables {
                    out!("{table}");
                }
            }
        }
        TablesCommand::Create { name } => {
            let created = store.create_table(&name).await? == TableCreation::Created;
            if out.json {
                out!("{}", json!({ "table": name, "created": created }));
            } else if created {
                out!("{name}: created");
            } else {
                out!("{name}: already there");
            }
        }
        TablesCommand::Delete { name } => {
            if !store.delete_table(&name).await? {
                return Err(Failure {
                    code: Failure::NOT_FOUND,
                    message: format!("no table {name:?} to delete"),
                });
            }
            if out.json {
                out!("{}", json!({ "table": name, "deleted": true }));
            } else {
                out!("{name}: deleted");
            }
        }
    }
    Ok(())
}
