//! `nvmos study power` (seed 004, `nvmos_sim::power`): the terminal
//! tables ([`tables`]) and `power.html` ([`html`]). Every number cell of
//! the page carries `data-json`, the JSON pointer of its figure in
//! `power.json`, which the CLI's browser test compares.

mod page;
mod text;

pub use page::html;
pub use text::tables;
