//! `#[derive(Fields)]`: a struct's field names, as `Type::fields()`.
//! A proc macro with no dependencies, so that rustc `dlopen`s it while its
//! threads run (compat's `cargo` case builds it).
extern crate proc_macro;

use proc_macro::{Delimiter, TokenStream, TokenTree};

#[proc_macro_derive(Fields)]
pub fn fields(input: TokenStream) -> TokenStream {
    let (mut name, mut body, mut after_struct) = (None, None, false);
    for t in input {
        match t {
            TokenTree::Ident(i) if i.to_string() == "struct" => after_struct = true,
            TokenTree::Ident(i) if after_struct && name.is_none() => name = Some(i.to_string()),
            TokenTree::Group(g) if g.delimiter() == Delimiter::Brace && name.is_some() => body = Some(g.stream()),
            _ => {}
        }
    }
    // A field's name is the last identifier before a `:` at the top level.
    let (mut fields, mut last, mut depth, mut in_name) = (Vec::new(), None, 0, true);
    for t in body.expect("a struct with named fields") {
        match t {
            TokenTree::Punct(p) if p.as_char() == ':' && depth == 0 && in_name => {
                fields.extend(last.take());
                in_name = false;
            }
            TokenTree::Punct(p) if p.as_char() == '<' => depth += 1,
            TokenTree::Punct(p) if p.as_char() == '>' => depth -= 1,
            TokenTree::Punct(p) if p.as_char() == ',' && depth == 0 => in_name = true,
            TokenTree::Ident(i) if in_name => last = Some(i.to_string()),
            _ => {}
        }
    }
    let list: Vec<String> = fields.iter().map(|f| format!("{f:?}")).collect();
    format!(
        "impl {} {{ pub fn fields() -> &'static [&'static str] {{ &[{}] }} }}",
        name.expect("a struct"),
        list.join(", ")
    )
    .parse()
    .expect("valid tokens")
}
