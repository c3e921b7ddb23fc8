//! Queue configurations the soak reloads: valid ones that move limits around a
//! fixed queue tree (`root.a`, `root.b.b1`, `root.b.b2`), some with guarantees,
//! `preemption.delay` and `preemption.policy` fence/disabled so preemption
//! triggers, and invalid ones the
//! core must refuse while keeping the running configuration.

/// How many of [`VALID`] (the first ones) have no guarantees for preemption.
pub const PLAIN: usize = 5;

/// Valid configurations; the first is the one registered at the start.
pub const VALID: &[&str] = &[
    "partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: a
          - name: b
            queues:
              - name: b1
              - name: b2
",
    "partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: a
            resources:
              max: {memory: 300, vcore: 30}
          - name: b
            queues:
              - name: b1
              - name: b2
",
    "partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: a
          - name: b
            resources:
              max: {memory: 500, vcore: 60}
            queues:
              - name: b1
                resources:
                  max: {memory: 200}
              - name: b2
",
    "partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: a
            resources:
              guaranteed: {memory: 100, vcore: 10}
              max: {memory: 400}
          - name: b
            queues:
              - name: b1
              - name: b2
                maxapplications: 2
",
    "partitions:
  - name: default
    nodesortpolicy:
      type: binpacking
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: a
          - name: b
            resources:
              max: {memory: 900, vcore: 100}
            queues:
              - name: b1
              - name: b2
",
    "partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        properties:
          preemption.delay: 1s
        queues:
          - name: a
            resources:
              guaranteed: {memory: 300, vcore: 30000}
          - name: b
            properties:
              preemption.policy: fence
            resources:
              guaranteed: {memory: 300, vcore: 30000}
            queues:
              - name: b1
                resources:
                  guaranteed: {memory: 150, vcore: 15000}
              - name: b2
                resources:
                  guaranteed: {memory: 150, vcore: 15000}
",
    "partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        properties:
          preemption.delay: 2s
        queues:
          - name: a
            properties:
              preemption.policy: disabled
            resources:
              guaranteed: {memory: 200, vcore: 20000}
          - name: b
            resources:
              max: {memory: 800}
            queues:
              - name: b1
                resources:
                  guaranteed: {memory: 200, vcore: 20000}
              - name: b2
                resources:
                  guaranteed: {memory: 100}
",
];

/// One queue's configured max: (queue path, memory, vcore in milli).
pub type QueueMax = (&'static str, Option<i64>, Option<i64>);

/// The configured max of every queue that has one in [`VALID`] (same order):
/// (queue path, memory, vcore in milli); `None` is unlimited. Written out by
/// hand so the RM's expectations do not come from the core's parser; a test
/// holds the two together.
pub const MAX: &[&[QueueMax]] = &[
    &[],
    &[("root.a", Some(300), Some(30_000))],
    &[
        ("root.b", Some(500), Some(60_000)),
        ("root.b.b1", Some(200), None),
    ],
    &[("root.a", Some(400), None)],
    &[("root.b", Some(900), Some(100_000))],
    &[],
    &[("root.b", Some(800), None)],
];

/// True when `size` (memory, vcore) fits under the max of `queue` and of every
/// queue above it in the configuration `text` (one of [`VALID`]).
pub fn fits_queue_max(text: &str, queue: &str, size: (i64, i64)) -> bool {
    let Some(i) = VALID.iter().position(|v| *v == text) else {
        return true;
    };
    MAX[i].iter().all(|&(path, memory, vcore)| {
        let above = queue == path || queue.starts_with(&format!("{path}."));
        !above || memory.is_none_or(|m| size.0 <= m) && vcore.is_none_or(|v| size.1 <= v)
    })
}

/// Invalid configurations: broken YAML, an unknown key, a negative quantity, a
/// child max above its parent's, a duplicate queue.
pub const INVALID: &[&str] = &[
    "partitions: [",
    "partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: a
            colour: blue
",
    "partitions:
  - name: default
    queues:
      - name: root
        queues:
          - name: a
            resources:
              max: {memory: -5}
",
    "partitions:
  - name: default
    queues:
      - name: root
        queues:
          - name: b
            resources:
              max: {memory: 100}
            queues:
              - name: b1
                resources:
                  max: {memory: 200}
",
    "partitions:
  - name: default
    queues:
      - name: root
        queues:
          - name: a
          - name: A
",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(q: &unisched_core::config::QueueConfig, path: &str, out: &mut Vec<String>) {
        if !q.max.is_empty() {
            out.push(format!("{path} {:?}", q.max));
        }
        for c in &q.queues {
            walk(c, &format!("{path}.{}", c.name), out);
        }
    }

    #[test]
    fn the_max_table_matches_the_configurations() {
        assert_eq!(MAX.len(), VALID.len());
        for (text, table) in VALID.iter().zip(MAX) {
            let config = unisched_core::config::parse(text).expect("valid");
            let root = &config.partitions[0].root;
            let mut parsed = Vec::new();
            walk(root, &root.name, &mut parsed);
            let mine: Vec<String> = table
                .iter()
                .map(|(path, m, v)| {
                    let mut max = std::collections::BTreeMap::new();
                    if let Some(m) = m {
                        max.insert("memory".to_string(), *m);
                    }
                    if let Some(v) = v {
                        max.insert("vcore".to_string(), *v);
                    }
                    format!("{path} {max:?}")
                })
                .collect();
            assert_eq!(parsed, mine);
        }
    }
}
