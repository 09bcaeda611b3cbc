//! The import graph between the modules of a crate, for the check that no two modules import
//! each other, directly or round a longer cycle.
//!
//! Only sibling modules are compared: `component::instance` using `component::state` is an
//! edge between `instance` and `state` under `component`; a module using its own ancestor
//! or descendant is not an edge (a parent re-exports its children's items). References are
//! read from the source as written (`crate::a::b`, `super::a`, grouped `use` trees), with
//! comments, strings and `#[cfg(test)]` modules left out. A name an ancestor brings in with
//! `use` (re-exported or not: descendants see both) is followed to where it comes from, so
//! `super::LoadPhase` in `component::instance`, with `pub use loader::LoadPhase;` in
//! `component`, is an edge `instance -> loader`; glob imports (`use a::*`) are not followed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path inside its crate: `["component", "instance"]`; the root is empty.
pub type ModulePath = Vec<String>;

/// One cycle between sibling modules: the parent, and the children in cycle order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cycle {
    /// The module whose children form the cycle.
    pub parent: ModulePath,
    /// The children on the cycle.
    pub members: Vec<String>,
    /// For each edge `members[i] -> members[i+1]` (wrapping), a file that makes it.
    pub evidence: Vec<String>,
}

impl std::fmt::Display for Cycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parent = if self.parent.is_empty() {
            "crate".to_owned()
        } else {
            self.parent.join("::")
        };
        write!(f, "under `{parent}`: {}", self.members.join(" -> "))?;
        write!(f, " -> {} (", self.members[0])?;
        write!(f, "{})", self.evidence.join("; "))
    }
}

/// The modules of one crate and the sibling edges between them.
#[derive(Debug, Default)]
pub struct ImportGraph {
    modules: BTreeSet<ModulePath>,
    /// parent -> (from child -> (to child -> a file making the edge)).
    edges: BTreeMap<ModulePath, BTreeMap<String, BTreeMap<String, String>>>,
}

impl ImportGraph {
    /// Reads every `.rs` file under `src`, the source root of one crate.
    ///
    /// # Errors
    /// When a file cannot be read.
    pub fn of_crate(src: &Path) -> std::io::Result<Self> {
        let mut files = Vec::new();
        collect_files(src, &mut files)?;
        let mut sources = Vec::new();
        for file in files {
            let module = module_path(src, &file);
            let text = std::fs::read_to_string(&file)?;
            let shown = file
                .strip_prefix(src)
                .unwrap_or(&file)
                .display()
                .to_string();
            sources.push((module, shown, text));
        }
        Ok(Self::of_sources(sources))
    }

    /// The graph of `(module, file name, source)` triples.
    pub fn of_sources(sources: Vec<(ModulePath, String, String)>) -> Self {
        let mut graph = Self {
            modules: sources.iter().map(|(m, _, _)| m.clone()).collect(),
            ..Self::default()
        };
        let code: Vec<String> = sources
            .iter()
            .map(|(_, _, text)| strip_tests(&strip_comments_and_strings(text)))
            .collect();
        let aliases: Aliases = sources
            .iter()
            .zip(&code)
            .map(|((module, _, _), code)| (module.clone(), graph.aliases(code, module)))
            .collect();
        for ((module, file, _), code) in sources.iter().zip(&code) {
            for target in references(code, module) {
                let target = graph.resolve(&aliases, target);
                graph.add_edge(module, &target, file);
            }
        }
        graph
    }

    /// The names `code` (of `module`) brings in with `use`, each with the path from the crate
    /// root it stands for; paths into other crates are left out.
    fn aliases(&self, code: &str, module: &ModulePath) -> BTreeMap<String, Vec<String>> {
        let chars: Vec<char> = code.chars().collect();
        let mut names = BTreeMap::new();
        for at in use_statements(&chars) {
            let (paths, _) = parse_use_tree(&chars, at);
            for (path, alias) in paths {
                let Some(absolute) = self.use_target(&path, module) else {
                    continue;
                };
                let name = alias.or_else(|| absolute.last().cloned());
                if let Some(name) = name.filter(|n| n != "self" && n != "_") {
                    names.insert(name, absolute);
                }
            }
        }
        names
    }

    /// Where a `use` path of `module` leads, from the crate root: through `crate`, `super`,
    /// `self` or a child module; `None` for another crate's items.
    fn use_target(&self, path: &[String], module: &ModulePath) -> Option<Vec<String>> {
        match path.first().map(String::as_str) {
            Some("crate" | "super") => absolute(path, module),
            Some("self") => absolute(&path[1..], module).map(|_| {
                let mut base = module.clone();
                base.extend(path[1..].iter().cloned());
                base
            }),
            Some(first) => {
                let mut child = module.clone();
                child.push(first.to_owned());
                self.modules.contains(&child).then(|| {
                    let mut base = module.clone();
                    base.extend(path.iter().cloned());
                    base
                })
            }
            None => None,
        }
    }

    /// `target` with every name an ancestor module imported replaced by where it comes from.
    fn resolve(&self, aliases: &Aliases, mut target: Vec<String>) -> Vec<String> {
        // A chain of re-exports is short; the bound only stops a `use` naming itself.
        for _ in 0..16 {
            let Some(depth) = (0..target.len())
                .rev()
                .find(|&d| self.modules.contains(&target[..d]))
            else {
                break;
            };
            let Some(source) = aliases
                .get(&target[..depth].to_vec())
                .and_then(|names| names.get(&target[depth]))
            else {
                break;
            };
            let mut next = source.clone();
            next.extend(target[depth + 1..].iter().cloned());
            if next == target {
                break;
            }
            target = next;
        }
        target
    }

    /// How many modules the crate has.
    pub fn module_count(&self) -> usize {
        self.modules.len()
    }

    /// How many sibling edges were found.
    pub fn edge_count(&self) -> usize {
        self.edges
            .values()
            .flat_map(BTreeMap::values)
            .map(BTreeMap::len)
            .sum()
    }

    fn add_edge(&mut self, from: &ModulePath, target: &[String], file: &str) {
        let common = from.iter().zip(target).take_while(|(a, b)| a == b).count();
        if common == from.len() || common >= target.len() {
            return; // to a descendant, or to an ancestor or its items
        }
        let parent = from[..common].to_vec();
        let mut sibling = parent.clone();
        sibling.push(target[common].clone());
        if !self.modules.contains(&sibling) {
            return; // an item of the common ancestor
        }
        self.edges
            .entry(parent)
            .or_default()
            .entry(from[common].clone())
            .or_default()
            .entry(target[common].clone())
            .or_insert_with(|| file.to_owned());
    }

    /// Every cycle between sibling modules (one per strongly connected set).
    pub fn cycles(&self) -> Vec<Cycle> {
        let mut cycles = Vec::new();
        for (parent, edges) in &self.edges {
            for component in strongly_connected(edges) {
                if component.len() > 1 {
                    cycles.push(cycle_through(parent, edges, &component));
                }
            }
        }
        cycles
    }
}

fn collect_files(dir: &Path, files: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect_files(&path, files)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files.sort();
    Ok(())
}

/// `lib.rs`/`main.rs` are the root, `a/mod.rs` and `a.rs` are `a`, `a/b.rs` is `a::b`.
fn module_path(src: &Path, file: &Path) -> ModulePath {
    let relative = file.strip_prefix(src).unwrap_or(file);
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if let Some(last) = parts.pop() {
        let stem = last.trim_end_matches(".rs");
        let is_root = parts.is_empty() && (stem == "lib" || stem == "main");
        if stem != "mod" && !is_root {
            parts.push(stem.to_owned());
        }
    }
    parts
}

/// The source with comments, string literals and char literals blanked out (lifetimes kept).
fn strip_comments_and_strings(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let rest = &chars[i..];
        if rest.starts_with(&['/', '/']) {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if rest.starts_with(&['/', '*']) {
            i = skip_block_comment(&chars, i);
        } else if let Some(end) = raw_string_end(&chars, i) {
            out.push_str("\"\"");
            i = end;
        } else if chars[i] == '"' {
            i = skip_quoted(&chars, i + 1, '"');
            out.push_str("\"\"");
        } else if chars[i] == '\'' && is_char_literal(&chars, i) {
            i = skip_quoted(&chars, i + 1, '\'');
            out.push_str("' '");
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

fn skip_block_comment(chars: &[char], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < chars.len() {
        if chars[i..].starts_with(&['/', '*']) {
            depth += 1;
            i += 2;
        } else if chars[i..].starts_with(&['*', '/']) {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    i
}

/// The index after the closing `quote`, from `i` (just after the opening one).
fn skip_quoted(chars: &[char], mut i: usize, quote: char) -> usize {
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            c if c == quote => return i + 1,
            _ => i += 1,
        }
    }
    i
}

/// The end of a raw string (`r"..."`, `r#"..."#`, `br"..."`) starting at `i`, if one does.
fn raw_string_end(chars: &[char], i: usize) -> Option<usize> {
    let preceded_by_ident = i > 0 && is_ident_char(chars[i - 1]);
    let mut j = i;
    if chars.get(j) == Some(&'b') {
        j += 1;
    }
    if preceded_by_ident || chars.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = chars[j..].iter().take_while(|c| **c == '#').count();
    j += hashes;
    if chars.get(j) != Some(&'"') {
        return None;
    }
    j += 1;
    while j < chars.len() {
        if chars[j] == '"'
            && chars[j + 1..]
                .iter()
                .take(hashes)
                .filter(|c| **c == '#')
                .count()
                == hashes
        {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(j)
}

/// `'x'` or `'\n'` rather than a lifetime `'a`.
fn is_char_literal(chars: &[char], i: usize) -> bool {
    match chars.get(i + 1) {
        Some('\\') => true,
        Some(_) => chars.get(i + 2) == Some(&'\''),
        None => false,
    }
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The code without `#[cfg(test)] mod ... { ... }` blocks: tests may reach anywhere.
fn strip_tests(code: &str) -> String {
    let mut out = code.to_owned();
    while let Some(at) = out.find("#[cfg(test)]") {
        let after = at + "#[cfg(test)]".len();
        let Some(open) = out[after..].find('{').map(|o| after + o) else {
            break;
        };
        let is_module = out[after..open].trim_start().starts_with("mod ");
        let end = if is_module {
            matching_brace(&out, open).unwrap_or(out.len())
        } else {
            after
        };
        out.replace_range(at..end, "");
    }
    out
}

fn matching_brace(code: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (offset, c) in code[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + offset + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// Every absolute module-or-item path `code` (of module `module`) names through `crate::` or
/// `super::`.
fn references(code: &str, module: &ModulePath) -> Vec<Vec<String>> {
    let chars: Vec<char> = code.chars().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts_word = i == 0 || !is_ident_char(chars[i - 1]) && chars[i - 1] != ':';
        let word = |w: &str| chars[i..].starts_with(&w.chars().collect::<Vec<_>>());
        if starts_word && (word("crate::") || word("super::")) {
            let (paths, end) = parse_tree(&chars, i);
            for path in paths {
                if let Some(absolute) = absolute(&path, module) {
                    found.push(absolute);
                }
            }
            i = end.max(i + 1);
        } else {
            i += 1;
        }
    }
    found
}

/// `crate::a::b` or `super::super::a` as a path from the crate root.
fn absolute(path: &[String], module: &ModulePath) -> Option<Vec<String>> {
    let mut base: Vec<String>;
    let mut rest = path;
    if rest.first().map(String::as_str) == Some("crate") {
        base = Vec::new();
        rest = &rest[1..];
    } else {
        base = module.clone();
        while rest.first().map(String::as_str) == Some("super") {
            base.pop()?;
            rest = &rest[1..];
        }
    }
    for segment in rest {
        match segment.as_str() {
            "self" => {}
            "*" => break,
            other => base.push(other.to_owned()),
        }
    }
    Some(base)
}

/// For each module, the names it brings in with `use` and the paths they stand for.
type Aliases = BTreeMap<ModulePath, BTreeMap<String, Vec<String>>>;

/// Where the tree of each `use` declaration in `chars` starts (after `use `).
fn use_statements(chars: &[char]) -> Vec<usize> {
    let keyword: Vec<char> = "use".chars().collect();
    (0..chars.len())
        .filter(|&i| {
            chars[i..].starts_with(&keyword)
                && (i == 0 || !is_ident_char(chars[i - 1]))
                && chars.get(i + 3).is_some_and(|c| c.is_whitespace())
        })
        .map(|i| skip_space(chars, i + 3))
        .collect()
}

/// A path a `use` names, with its `as` name if it has one.
type UsePath = (Vec<String>, Option<String>);

/// A `use` tree at `i`: every path it names with its `as` name, if it has one.
fn parse_use_tree(chars: &[char], i: usize) -> (Vec<UsePath>, usize) {
    let (paths, end) = parse_tree(chars, i);
    let mut named = Vec::new();
    for path in paths {
        let (path, alias) = match path.iter().position(|s| s.starts_with(RENAMED)) {
            Some(at) => (
                path[..at].to_vec(),
                Some(path[at].trim_start_matches(RENAMED).to_owned()),
            ),
            None => (path, None),
        };
        named.push((path, alias));
    }
    (named, end)
}

/// Marks the last segment of a path `parse_tree` read with `as NAME` after it.
const RENAMED: &str = " as ";

/// Parses a path or `use` tree at `i`; returns every path it names and where it ends. A path
/// renamed with `as` ends in a segment [`RENAMED`] + the new name.
fn parse_tree(chars: &[char], mut i: usize) -> (Vec<Vec<String>>, usize) {
    let mut prefix = Vec::new();
    loop {
        i = skip_space(chars, i);
        if chars.get(i) == Some(&'{') {
            let mut paths = Vec::new();
            i += 1;
            loop {
                i = skip_space(chars, i);
                match chars.get(i) {
                    Some('}') => return (paths, i + 1),
                    Some(',') => i += 1,
                    None => return (paths, i),
                    Some(_) => {
                        let (inner, end) = parse_tree(chars, i);
                        if end == i {
                            return (paths, i + 1);
                        }
                        paths.extend(inner.into_iter().map(|p| [prefix.clone(), p].concat()));
                        i = end;
                    }
                }
            }
        }
        if chars.get(i) == Some(&'*') {
            return (vec![prefix], i + 1);
        }
        let start = i;
        while i < chars.len() && is_ident_char(chars[i]) {
            i += 1;
        }
        if i == start {
            return (vec![prefix], i);
        }
        prefix.push(chars[start..i].iter().collect());
        let after = skip_space(chars, i);
        if chars[after..].starts_with(&[':', ':']) {
            i = after + 2;
        } else if let Some((alias, end)) = renamed(chars, after) {
            prefix.push(format!("{RENAMED}{alias}"));
            return (vec![prefix], end);
        } else {
            return (vec![prefix], i);
        }
    }
}

/// `as NAME` at `i`: the name and where it ends.
fn renamed(chars: &[char], i: usize) -> Option<(String, usize)> {
    let is_as =
        chars[i..].starts_with(&['a', 's']) && chars.get(i + 2).is_some_and(|c| c.is_whitespace());
    if !is_as {
        return None;
    }
    let start = skip_space(chars, i + 2);
    let end = start
        + chars[start..]
            .iter()
            .take_while(|c| is_ident_char(**c))
            .count();
    (end > start).then(|| (chars[start..end].iter().collect(), end))
}

fn skip_space(chars: &[char], mut i: usize) -> usize {
    while chars.get(i).is_some_and(|c| c.is_whitespace()) {
        i += 1;
    }
    i
}

/// Tarjan's strongly connected components of one parent's sibling graph.
fn strongly_connected(edges: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeMap<String, String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        components: Vec<Vec<String>>,
    }
    fn visit<'a>(state: &mut State<'a>, node: &'a str) {
        let n = state.index.len();
        state.index.insert(node, n);
        state.low.insert(node, n);
        state.stack.push(node);
        state.on_stack.insert(node);
        let edges = state.edges;
        for next in edges.get(node).into_iter().flat_map(BTreeMap::keys) {
            if !state.index.contains_key(next.as_str()) {
                visit(state, next);
                let low = state.low[next.as_str()].min(state.low[node]);
                state.low.insert(node, low);
            } else if state.on_stack.contains(next.as_str()) {
                let low = state.index[next.as_str()].min(state.low[node]);
                state.low.insert(node, low);
            }
        }
        if state.low[node] == state.index[node] {
            let mut component = Vec::new();
            while let Some(top) = state.stack.pop() {
                state.on_stack.remove(top);
                component.push(top.to_owned());
                if top == node {
                    break;
                }
            }
            state.components.push(component);
        }
    }
    let mut state = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        components: Vec::new(),
    };
    for node in edges.keys() {
        if !state.index.contains_key(node.as_str()) {
            visit(&mut state, node);
        }
    }
    state.components
}

/// One cycle through the members of a strongly connected set, with the file behind each edge.
fn cycle_through(
    parent: &ModulePath,
    edges: &BTreeMap<String, BTreeMap<String, String>>,
    component: &[String],
) -> Cycle {
    let members: BTreeSet<&str> = component.iter().map(String::as_str).collect();
    let start = component.iter().min().cloned().unwrap_or_default();
    // Walk edges inside the set until a node repeats: that closes a cycle.
    let mut path = vec![start.clone()];
    loop {
        let last = path.last().cloned().unwrap_or_default();
        let next = edges
            .get(&last)
            .into_iter()
            .flat_map(BTreeMap::keys)
            .find(|n| members.contains(n.as_str()))
            .cloned()
            .unwrap_or_else(|| start.clone());
        if let Some(at) = path.iter().position(|p| *p == next) {
            path.drain(..at);
            break;
        }
        path.push(next);
    }
    let evidence = (0..path.len())
        .map(|i| {
            let (from, to) = (&path[i], &path[(i + 1) % path.len()]);
            let file = edges
                .get(from)
                .and_then(|e| e.get(to))
                .cloned()
                .unwrap_or_default();
            format!("{from} -> {to} in {file}")
        })
        .collect();
    Cycle {
        parent: parent.clone(),
        members: path,
        evidence,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(path: &str) -> ModulePath {
        path.split("::")
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect()
    }

    fn graph(files: &[(&str, &str)]) -> ImportGraph {
        ImportGraph::of_sources(
            files
                .iter()
                .map(|(m, text)| (module(m), format!("{m}.rs"), (*text).to_owned()))
                .collect(),
        )
    }

    #[test]
    fn a_cycle_between_siblings_is_found_with_its_files() {
        let graph = graph(&[
            ("", "mod envelope; mod record;"),
            ("envelope", "use crate::record::Header;"),
            (
                "record",
                "use crate::envelope::{self, DUE};\nfn f() { envelope::wrap() }",
            ),
        ]);
        let cycles = graph.cycles();
        assert_eq!(cycles.len(), 1, "{cycles:?}");
        assert_eq!(cycles[0].members, ["envelope", "record"]);
        assert!(
            cycles[0]
                .to_string()
                .contains("record -> envelope in record.rs")
        );
    }

    #[test]
    fn a_longer_cycle_through_nested_modules_and_super_is_found() {
        let graph = graph(&[
            ("component", ""),
            ("component::instance", "use super::state::HostState;"),
            ("component::state", "use super::super::component::env::Env;"),
            (
                "component::env",
                "fn f() -> crate::component::instance::Live { todo!() }",
            ),
        ]);
        let cycles = graph.cycles();
        assert_eq!(cycles.len(), 1, "{cycles:?}");
        assert_eq!(cycles[0].parent, ["component"]);
        assert_eq!(cycles[0].members.len(), 3);
    }

    #[test]
    fn ancestors_descendants_comments_strings_and_tests_make_no_edges() {
        let graph = graph(&[
            ("", "mod a; mod b; pub use a::Thing;"),
            (
                "a",
                "use crate::Thing; use super::Root; // use crate::b::X;\nmod inner;",
            ),
            ("a::inner", "use crate::a::Thing;"),
            (
                "b",
                "const S: &str = \"crate::a::x\"; const R: &str = r#\"crate::a\"#;\n\
                 fn l<'a>(c: char) -> bool { c == '\"' }\n\
                 #[cfg(test)]\nmod tests { use crate::a::Thing; }\n\
                 use crate::a::Thing;",
            ),
        ]);
        assert_eq!(graph.edge_count(), 1, "only b -> a: {:?}", graph.edges);
        assert!(graph.cycles().is_empty());
    }

    #[test]
    fn a_cycle_through_a_parent_s_re_export_is_found() {
        // `instance` takes `LoadPhase` through `component`'s `pub use`; `loader` uses `instance`.
        let graph = graph(&[
            (
                "component",
                "mod instance; mod loader; pub use loader::LoadPhase;",
            ),
            ("component::instance", "use super::LoadPhase;"),
            ("component::loader", "use super::instance::Live;"),
        ]);
        let cycles = graph.cycles();
        assert_eq!(cycles.len(), 1, "{cycles:?}");
        assert!(
            cycles[0].to_string().contains("instance -> loader"),
            "{}",
            cycles[0]
        );
    }

    #[test]
    fn re_exports_are_followed_through_renames_the_root_and_chains() {
        let graph = graph(&[
            (
                "",
                "mod a; mod b; mod c; pub use a::Thing as Renamed; use crate::c::Deep;",
            ),
            ("a", "pub use crate::b::Inner as Thing;"),
            (
                "b",
                "pub struct Inner; fn f() -> crate::Renamed { todo!() }",
            ),
            ("c", "fn g(_: crate::Deep) {} pub use std::fmt::Debug;"),
        ]);
        // b -> (root Renamed -> a::Thing -> b::Inner) is b's own item: no edge; a -> b stays;
        // c -> root Deep -> c::Deep is its own. No cycle, and nothing followed into `std`.
        assert!(graph.cycles().is_empty(), "{:?}", graph.cycles());
        assert_eq!(graph.edge_count(), 1, "{:?}", graph.edges);
        let cyclic = super::ImportGraph::of_sources(vec![
            (
                module(""),
                "lib.rs".into(),
                "mod a; mod b; pub use a::Thing as Renamed;".into(),
            ),
            (
                module("a"),
                "a.rs".into(),
                "pub struct Thing; use crate::b::f;".into(),
            ),
            (
                module("b"),
                "b.rs".into(),
                "fn f() -> crate::Renamed { todo!() }".into(),
            ),
        ]);
        assert_eq!(
            cyclic.cycles().len(),
            1,
            "a -> b, and b -> a through `Renamed`"
        );
    }

    #[test]
    fn grouped_trees_name_every_path() {
        let chars: Vec<char> = "crate::{app::{A, B}, log::*, self}".chars().collect();
        let (paths, _) = parse_tree(&chars, 0);
        assert_eq!(
            paths,
            vec![
                vec!["crate", "app", "A"],
                vec!["crate", "app", "B"],
                vec!["crate", "log"],
                vec!["crate", "self"],
            ]
        );
    }
}
