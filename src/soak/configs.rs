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
