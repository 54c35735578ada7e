//! The tree reads as the pipeline only while no module depends on one that
//! depends back on it. This test reads every crate's sources and fails on a
//! cycle between top-level modules (`crate::a` naming `crate::b` and back,
//! directly or through others); test code does not count.

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::{Path, PathBuf};

    const CRATES: &[&str] = &[
        "probes",
        "styx-probe-c",
        "styx-common",
        "styx-usdt",
        "styx-events",
        "styx-loader",
        "styx-rv",
        "styx-qemu",
    ];

    #[test]
    fn no_module_depends_on_itself_through_others() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for krate in CRATES {
            let src = root.join(krate).join("src");
            let graph = module_graph(&src);
            assert!(!graph.is_empty(), "no modules read in {}", src.display());
            if let Some(cycle) = find_cycle(&graph) {
                panic!(
                    "{krate}: modules depend on each other: {}",
                    cycle.join(" -> ")
                );
            }
        }
    }

    /// Top-level module → the other top-level modules its non-test code names.
    fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for file in rust_files(src) {
            let relative = file.strip_prefix(src).expect("under src");
            let module = relative
                .components()
                .next()
                .and_then(|c| c.as_os_str().to_str())
                .map(|s| s.trim_end_matches(".rs").to_string())
                .expect("a file name");
            if module == "lib" || module == "main" || relative.ends_with("tests.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&file).expect("readable source");
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            let uses = graph.entry(module.clone()).or_default();
            for (i, _) in code.match_indices("crate::") {
                let name: String = code[i + "crate::".len()..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() && name != module {
                    uses.insert(name);
                }
            }
        }
        graph
    }

    fn rust_files(dir: &Path) -> Vec<PathBuf> {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).expect("readable directory") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                files.extend(rust_files(&path));
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
        files
    }

    /// A path that comes back to where it started, if any.
    fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
        fn visit(
            node: &str,
            graph: &BTreeMap<String, BTreeSet<String>>,
            path: &mut Vec<String>,
            done: &mut BTreeSet<String>,
        ) -> Option<Vec<String>> {
            if let Some(start) = path.iter().position(|n| n == node) {
                let mut cycle = path[start..].to_vec();
                cycle.push(node.to_string());
                return Some(cycle);
            }
            if done.contains(node) {
                return None;
            }
            path.push(node.to_string());
            for next in graph.get(node).into_iter().flatten() {
                if let Some(cycle) = visit(next, graph, path, done) {
                    return Some(cycle);
                }
            }
            path.pop();
            done.insert(node.to_string());
            None
        }
        let mut done = BTreeSet::new();
        graph
            .keys()
            .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
    }

    #[test]
    fn a_cycle_is_found() {
        let graph: BTreeMap<String, BTreeSet<String>> = [
            ("a", vec!["b"]),
            ("b", vec!["c"]),
            ("c", vec!["a"]),
            ("d", vec![]),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
        .collect();
        assert_eq!(find_cycle(&graph).unwrap(), ["a", "b", "c", "a"]);
    }
}
