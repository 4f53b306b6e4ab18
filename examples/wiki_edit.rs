//! Two editors change the same wiki page at the same time. The second save is
//! based on a stale copy, so it fails with a Conflict instead of erasing the
//! first editor's work; the second editor re-reads, merges the two changes,
//! and saves again.
//!
//! Runs on the embedded memory backend; set `AZURE_STORAGE_CONNECTION_STRING`
//! to run against Azure Storage or Azurite.
//!
//! ```text
//! cargo run --example wiki_edit
//! ```

use leasehold::{Entity, Error, Store, Versioned};

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "WikiPages")]
struct Page {
    #[entity(partition_key)]
    wiki: String,
    #[entity(row_key)]
    title: String,
    /// One paragraph per entry, stored as JSON.
    #[entity(json)]
    paragraphs: Vec<String>,
    revision: i64,
    last_editor: String,
}

/// An editor's change: add a paragraph at the end.
fn append(page: &mut Page, editor: &str, paragraph: &str) {
    page.paragraphs.push(paragraph.to_owned());
    page.revision += 1;
    page.last_editor = editor.to_owned();
}

/// Saves an edit made on `copy`; on a conflict, re-reads the page, re-applies
/// the edit to the fresh copy (a three-way merge would go here) and retries.
async fn save(
    pages: &leasehold::Table<Page>,
    mut copy: Versioned<Page>,
    editor: &str,
    paragraph: &str,
) -> Result<Versioned<Page>, Error> {
    append(&mut copy, editor, paragraph);
    loop {
        match pages.replace(&copy).await {
            Ok(saved) => return Ok(saved),
            Err(Error::Conflict { .. }) => {
                println!("{editor}: the page changed while I was editing; merging");
                let mut fresh =
                    pages
                        .get(&copy.wiki, &copy.title)
                        .await?
                        .ok_or_else(|| Error::NotFound {
                            what: "the page was deleted".into(),
                            code: None,
                            table: None,
                            row: None,
                        })?;
                append(&mut fresh, editor, paragraph);
                copy = fresh;
            }
            Err(other) => return Err(other),
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let store = match std::env::var("AZURE_STORAGE_CONNECTION_STRING") {
        Ok(_) => Store::from_env()?,
        Err(_) => Store::memory(),
    };
    let pages = store.table::<Page>();
    let wiki = format!("wiki-{}", uuid::Uuid::new_v4().simple());
    pages
        .insert(Page {
            wiki: wiki.clone(),
            title: "Rust".into(),
            paragraphs: vec!["Rust is a programming language.".into()],
            revision: 1,
            last_editor: "founder".into(),
        })
        .await?;

    // Both editors open the page: the same revision, the same ETag.
    let ada = pages.get(&wiki, "Rust").await?.expect("page exists");
    let bob = pages.get(&wiki, "Rust").await?.expect("page exists");

    let saved = save(&pages, ada, "ada", "It has no garbage collector.").await?;
    println!("ada saved revision {}", saved.revision);
    let saved = save(&pages, bob, "bob", "Its mascot is a crab.").await?;
    println!("bob saved revision {}", saved.revision);

    let page = pages.get(&wiki, "Rust").await?.expect("page exists");
    println!("revision {} by {}:", page.revision, page.last_editor);
    for p in &page.paragraphs {
        println!("  {p}");
    }
    assert_eq!(page.revision, 3, "both edits kept");
    assert_eq!(page.paragraphs.len(), 3, "no edit was lost");
    Ok(())
}
