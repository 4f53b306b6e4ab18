//! `leasehold tables ...`: list, create and delete the tables under the
//! store's table prefix; index tables are listed apart and deleted with
//! their table.

use leasehold::Store;
use leasehold::backend::TableCreation;
use serde_json::json;

use crate::args::TablesCommand;
use crate::failure::Failure;
use crate::output::Output;

/// What the name of a table's index table adds to the table's name.
const INDEX_SUFFIX: &str = "Idx";

/// The table whose index table is `index_table`.
fn index_of(index_table: &str) -> &str {
    index_table
        .strip_suffix(INDEX_SUFFIX)
        .unwrap_or(index_table)
}

/// Runs a `tables` command.
pub(crate) async fn run(
    store: &Store,
    command: TablesCommand,
    out: &Output,
) -> Result<(), Failure> {
    match command {
        TablesCommand::List => {
            let tables = store.list_tables().await?;
            let index_tables = store.list_index_tables().await?;
            if out.json {
                out!(
                    "{}",
                    json!({ "tables": tables, "index_tables": index_tables })
                );
            } else if tables.is_empty() && index_tables.is_empty() {
                out.note("no tables");
            } else {
                for table in tables {
                    out!("{table}");
                }
                for table in index_tables {
                    out!("{table}  (index table of {})", index_of(&table));
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
            // Asked first, to say what the delete takes along.
            let index_table = format!("{name}{INDEX_SUFFIX}");
            let with_index = store.list_index_tables().await?.contains(&index_table);
            if !store.delete_table(&name).await? {
                return Err(Failure {
                    code: Failure::NOT_FOUND,
                    message: format!("no table {name:?} to delete"),
                });
            }
            let index_table = with_index.then_some(index_table);
            if out.json {
                out!(
                    "{}",
                    json!({ "table": name, "deleted": true, "index_table": index_table })
                );
            } else if let Some(index_table) = index_table {
                out!("{name}: deleted, with its index table {index_table}");
            } else {
                out!("{name}: deleted");
            }
        }
    }
    Ok(())
}
