//! The `/proc/mdstat` parser: text in, [`MdStat`] out. Pure: no I/O, never panics.
//!
//! Source of truth for the printed forms: drivers/md/md.c `md_seq_show` and `status_resync`, the
//! personalities' `status` hooks (raid0 `Nk chunks`, linear `Nk rounding`, raid5 `level N, Nk
//! chunk, algorithm N`, raid10 `NK chunks N near-copies|far-copies|offset-copies`, raid1/5/10
//! `[T/A] [UU_]`) and md-bitmap.c `md_bitmap_status`. Besides what current kernels print, it reads
//! the forms people paste: changed indentation, TABs turned into spaces, missing `Personalities`
//! or `unused devices` lines, blank lines of any width, 2.4-kernel `read_ahead` / `Event:` lines.
//!
//! An array without member devices (all removed from a running array, or an array that is set
//! up but has none yet) has no blocks line: `md_seq_show` prints the personality's status right
//! after the level (and ` super V`) on the header line, e.g. `md126 : active raid5 super 1.2 level
//! 5, 64k chunk, algorithm 2 [4/0] [____]`. That form is read like a blocks line without the size,
//! so the array is reported (with `size_kib: None`): the worst array to hide is a dead one.
//!
//! Error model (also described in tests/fixtures/mdstat/README.md):
//! - An array whose stanza is broken (bad header or member token, members but no blocks line, an
//!   unparseable body line, a redundant level without `[T/A] [U_]`) is left out, with one
//!   [`ParseIssue`] at the line where the broken part starts; the following lines of the same
//!   stanza are part of that error.
//! - Text that is not mdstat (a pasted shell prompt) outside a stanza is an error part; consecutive
//!   such lines are one part. Everything else is still reported.
//! - Inconsistent but parseable text (`[5/5] [UUUUUU]`) is reported as printed, without error.

use crate::model::{
    Array, Bitmap, HeaderState, MdStat, Member, MemberFlag, ParseIssue, ReadOnly, SyncKind,
    SyncState, SyncStatus,
};

/// Parses the text of `/proc/mdstat` (or a paste of it).
///
/// Never fails and never panics: what cannot be parsed becomes an entry of [`MdStat::errors`]
/// (1-based line numbers, in line order) and everything else is still reported. The speed-limit
/// fields and `Array::sysfs` stay `None`: they come from other files (see `crate::sysfs`).
pub fn parse(text: &str) -> MdStat {
    let mut p = Parser::default();
    for (i, raw) in text.split('\n').enumerate() {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        p.line(i + 1, line);
    }
    p.finish_stanza();
    let mut out = p.out;
    // Stanza errors are recorded when the stanza ends, so restore line order.
    out.errors.sort_by_key(|e| e.line);
    out
}

/// What a line looks like, decided from its first characters only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Blank,
    Personalities,
    /// 2.4-kernel `read_ahead N sectors` and `Event: N` lines: nothing we report.
    Ignored,
    Unused,
    Header,
    Blocks,
    Progress,
    Bitmap,
    Unknown,
}

/// Body lines in the order the kernel prints them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    Header,
    Blocks,
    Progress,
    Bitmap,
}

fn classify(t: &str) -> Kind {
    if t.is_empty() {
        return Kind::Blank;
    }
    if let Some(rest) = t.strip_prefix("Personalities") {
        if rest.trim_start().starts_with(':') {
            return Kind::Personalities;
        }
    }
    if t.starts_with("read_ahead") || t.starts_with("Event:") || t.starts_with("Event :") {
        return Kind::Ignored;
    }
    if t.starts_with("unused devices") {
        return Kind::Unused;
    }
    if header_split(t).is_some() {
        return Kind::Header;
    }
    if t.starts_with(|c: char| c.is_ascii_digit()) {
        return Kind::Blocks;
    }
    if t.starts_with("bitmap") {
        return Kind::Bitmap;
    }
    // A progress bar `[==>...]` followed by text; an elision marker like `[...]` or `[snip]`
    // alone is pasted text, not a sync line.
    if let Some((bar, after)) = t.strip_prefix('[').and_then(|r| r.split_once(']')) {
        if bar.chars().all(|c| matches!(c, '=' | '>' | '.')) && !after.trim().is_empty() {
            return Kind::Progress;
        }
        return Kind::Unknown;
    }
    if let Some((word, _)) = t.split_once('=') {
        let word = word.trim();
        if !word.is_empty() && word.chars().all(|c| c.is_ascii_lowercase()) {
            return Kind::Progress;
        }
    }
    Kind::Unknown
}

/// `mdN : rest` → `(mdN, rest)`. Kernel names are `mdN`, `md_dN` or `md_NAME`.
fn header_split(t: &str) -> Option<(&str, &str)> {
    let colon = t.find(':')?;
    let name = t[..colon].trim();
    let valid = name.starts_with("md")
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.');
    valid.then(|| (name, &t[colon + 1..]))
}

/// An array being read: its header and the body lines seen so far.
struct Stanza {
    array: Array,
    header_line: usize,
    header_text: String,
    stage: Stage,
    /// The first error of this stanza; once set, the rest of the stanza is swallowed.
    broken: Option<ParseIssue>,
    /// A blank line was seen since the last line of this stanza.
    blank_since: bool,
}

impl Stanza {
    fn complete(&self) -> bool {
        self.broken.is_none() && (self.stage > Stage::Header || self.array.members.is_empty())
    }

    fn break_at(&mut self, line: usize, text: &str, message: String) {
        if self.broken.is_none() {
            self.broken = Some(ParseIssue {
                line,
                text: text.to_string(),
                message,
            });
        }
    }

    fn fits(&self, kind: Kind) -> bool {
        match kind {
            Kind::Blocks => self.stage == Stage::Header,
            Kind::Progress => self.stage == Stage::Blocks,
            Kind::Bitmap => matches!(self.stage, Stage::Blocks | Stage::Progress),
            _ => false,
        }
    }

    /// Parses a body line that fits the stage.
    fn feed(&mut self, n: usize, line: &str, t: &str, kind: Kind) {
        let result = match kind {
            Kind::Blocks => parse_blocks(t, &mut self.array).map(|()| Stage::Blocks),
            Kind::Progress => parse_progress(t).map(|s| {
                self.array.sync = Some(s);
                Stage::Progress
            }),
            Kind::Bitmap => parse_bitmap(t).map(|b| {
                self.array.bitmap = Some(b);
                Stage::Bitmap
            }),
            _ => Err("not an array line".to_string()),
        };
        match result {
            Ok(stage) => self.stage = stage,
            Err(msg) => self.break_at(n, line, format!("{}: {msg}", self.array.name)),
        }
    }
}

#[derive(Default)]
struct Parser {
    out: MdStat,
    cur: Option<Stanza>,
    /// Line number of the last top-level bad line, to merge consecutive ones into one part.
    last_bad: Option<usize>,
}

impl Parser {
    fn line(&mut self, n: usize, line: &str) {
        let t = line.trim();
        let kind = classify(t);
        if !matches!(
            kind,
            Kind::Unknown | Kind::Blocks | Kind::Progress | Kind::Bitmap
        ) {
            self.last_bad = None;
        }
        match kind {
            Kind::Blank => {
                if let Some(st) = &mut self.cur {
                    st.blank_since = true;
                }
            }
            Kind::Personalities => {
                self.finish_stanza();
                self.personalities(n, line, t);
            }
            Kind::Ignored | Kind::Unused => self.finish_stanza(),
            Kind::Header => {
                self.finish_stanza();
                self.cur = Some(start_stanza(n, line, t));
            }
            Kind::Blocks | Kind::Progress | Kind::Bitmap => self.body(n, line, t, kind),
            Kind::Unknown => self.unknown(n, line),
        }
    }

    fn body(&mut self, n: usize, line: &str, t: &str, kind: Kind) {
        let Some(st) = &mut self.cur else {
            self.bad(n, line, "array line outside an array stanza".into());
            return;
        };
        if st.broken.is_some() {
            // The rest of a broken stanza belongs to its one error.
            st.blank_since = false;
            return;
        }
        if st.fits(kind) {
            st.blank_since = false;
            st.feed(n, line, t, kind);
        } else if st.complete() && st.blank_since {
            self.finish_stanza();
            self.bad(n, line, "array line outside an array stanza".into());
        } else {
            let msg = match kind {
                Kind::Blocks => "a second blocks line",
                Kind::Progress if st.stage == Stage::Header => "a sync line before the blocks line",
                Kind::Progress => "a second sync line",
                _ if st.stage == Stage::Header => "a bitmap line before the blocks line",
                _ => "a second bitmap line",
            };
            let msg = format!("{}: {msg}", st.array.name);
            st.break_at(n, line, msg);
            st.blank_since = false;
        }
    }

    fn unknown(&mut self, n: usize, line: &str) {
        if let Some(st) = &mut self.cur {
            if st.broken.is_some() && !st.blank_since {
                return;
            }
            if !st.complete() && st.broken.is_none() && !st.blank_since {
                let msg = format!(
                    "{}: not an mdstat line where the blocks line is due",
                    st.array.name
                );
                st.break_at(n, line, msg);
                st.blank_since = false;
                return;
            }
            self.finish_stanza();
        }
        self.bad(n, line, "not an mdstat line".into());
    }

    /// Records a top-level bad line, merged with the previous one when consecutive.
    fn bad(&mut self, n: usize, line: &str, message: String) {
        let merged = self.last_bad.is_some_and(|l| l + 1 == n);
        self.last_bad = Some(n);
        if !merged {
            self.out.errors.push(ParseIssue {
                line: n,
                text: line.to_string(),
                message,
            });
        }
    }

    fn personalities(&mut self, n: usize, line: &str, t: &str) {
        let rest = t.split_once(':').map_or("", |(_, r)| r);
        let mut stray = None;
        for tok in rest.split_whitespace() {
            match tok.strip_prefix('[').and_then(|x| x.strip_suffix(']')) {
                Some(p) if !p.is_empty() && !p.contains(['[', ']']) => {
                    self.out.personalities.push(p.to_string());
                }
                _ => stray = stray.or(Some(tok)),
            }
        }
        if let Some(tok) = stray {
            self.bad(n, line, format!("Personalities: `{tok}` is not a `[name]`"));
        }
    }

    fn finish_stanza(&mut self) {
        let Some(st) = self.cur.take() else { return };
        if let Some(issue) = st.broken {
            self.out.errors.push(issue);
        } else if st.stage == Stage::Header && !st.array.members.is_empty() {
            self.out.errors.push(ParseIssue {
                line: st.header_line,
                text: st.header_text,
                message: format!("{}: members but no blocks line", st.array.name),
            });
        } else {
            self.out.arrays.push(st.array);
        }
    }
}

fn start_stanza(n: usize, line: &str, t: &str) -> Stanza {
    let (name, rest) = header_split(t).unwrap_or((t, ""));
    let mut st = Stanza {
        array: empty_array(name),
        header_line: n,
        header_text: line.to_string(),
        stage: Stage::Header,
        broken: None,
        blank_since: false,
    };
    match parse_header(rest, &mut st.array) {
        // The personality status stood on the header: a sync or bitmap line may follow.
        Ok(true) => st.stage = Stage::Blocks,
        Ok(false) => {}
        Err(msg) => st.break_at(n, line, format!("{name}: {msg}")),
    }
    st
}

fn empty_array(name: &str) -> Array {
    Array {
        name: name.to_string(),
        state: HeaderState::Inactive,
        read_only: None,
        level: None,
        size_kib: None,
        metadata: None,
        raid_disks: None,
        active_disks: None,
        member_status: None,
        members: Vec::new(),
        sync: None,
        bitmap: None,
        sysfs: None,
    }
}

/// `active|inactive|broken [(read-only)|(auto-read-only)] [personality] members... [super X]
/// [status]` (the kernel appends ` super X` to the header when the array has no members, and
/// then the personality's status too, since there is no blocks line to carry it).
///
/// Returns whether the personality status was on the header line.
fn parse_header(rest: &str, a: &mut Array) -> Result<bool, String> {
    let toks: Vec<&str> = rest.split_whitespace().collect();
    let word = toks.first().ok_or("no array state after `:`")?;
    a.state = HeaderState::from_word(word).ok_or(format!("unknown array state `{word}`"))?;
    let mut i = 1;
    while let Some(&tok) = toks.get(i) {
        i += 1;
        match tok {
            "(read-only)" if a.read_only.is_none() && a.members.is_empty() => {
                a.read_only = Some(ReadOnly::ReadOnly);
            }
            "(auto-read-only)" if a.read_only.is_none() && a.members.is_empty() => {
                a.read_only = Some(ReadOnly::AutoReadOnly);
            }
            "super" if a.metadata.is_none() => {
                let v = toks.get(i).ok_or("`super` without a version")?;
                a.metadata = Some((*v).to_string());
                i += 1;
            }
            // No members, so the personality status follows (`[2/0] [__]`, `level 5, ...`).
            _ if a.level.is_some() && a.members.is_empty() && !is_member_token(tok) => {
                parse_status(&toks[i - 1..], a)?;
                return Ok(true);
            }
            _ if a.metadata.is_some() => return Err(format!("unexpected `{tok}` after super")),
            _ if tok.contains('[') => a.members.push(parse_member(tok)?),
            _ if a.level.is_none() && a.members.is_empty() && is_word(tok) => {
                a.level = Some(tok.to_string());
            }
            _ => return Err(format!("unexpected `{tok}` on the header line")),
        }
    }
    Ok(false)
}

/// `name[slot]...`: a `[` after at least one character (`[2/0]` is a status count, not a member).
fn is_member_token(tok: &str) -> bool {
    tok.find('[').is_some_and(|p| p > 0)
}

fn is_word(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// `name[slot]` then flags `(W)(J)(F|S)(R)`.
fn parse_member(tok: &str) -> Result<Member, String> {
    let bad = |why: &str| format!("member `{tok}`: {why}");
    let open = tok.find('[').ok_or_else(|| bad("no `[slot]`"))?;
    let name = &tok[..open];
    if name.is_empty() {
        return Err(bad("no device name"));
    }
    let after = &tok[open + 1..];
    let close = after
        .find(']')
        .ok_or_else(|| bad("unterminated `[slot]`"))?;
    let slot_text = &after[..close];
    if slot_text.is_empty() || !slot_text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad("the slot is not a number"));
    }
    let slot = slot_text
        .parse::<u32>()
        .map_err(|_| bad("the slot is out of range"))?;
    let mut flags = Vec::new();
    let mut rest = &after[close + 1..];
    while !rest.is_empty() {
        let flag = match rest.get(..3) {
            Some("(W)") => MemberFlag::WriteMostly,
            Some("(J)") => MemberFlag::Journal,
            Some("(F)") => MemberFlag::Faulty,
            Some("(S)") => MemberFlag::Spare,
            Some("(R)") => MemberFlag::Replacement,
            _ => return Err(bad("unknown flag (expected (W), (J), (F), (S) or (R))")),
        };
        flags.push(flag);
        rest = &rest[3..];
    }
    Ok(Member {
        name: name.to_string(),
        slot,
        flags,
    })
}

/// `N blocks [super V] [status]` (status: see [`parse_status`]).
fn parse_blocks(t: &str, a: &mut Array) -> Result<(), String> {
    let toks: Vec<&str> = t.split_whitespace().collect();
    let size = toks
        .first()
        .and_then(|s| parse_u64(s))
        .ok_or("the size before `blocks` is not a number")?;
    if toks.get(1) != Some(&"blocks") {
        return Err("expected `N blocks`".into());
    }
    a.size_kib = Some(size);
    let mut i = 2;
    if toks.get(i) == Some(&"super") {
        let v = toks.get(i + 1).ok_or("`super` without a version")?;
        a.metadata = Some((*v).to_string());
        i += 2;
    }
    parse_status(&toks[i..], a)
}

/// The personality's status: `[level extras] [[T/A] [UU_]]`, on the blocks line or, for an
/// array without members, on the header line.
fn parse_status(toks: &[&str], a: &mut Array) -> Result<(), String> {
    let mut end = toks.len();
    if end >= 2 {
        if let (Some((t, act)), Some(us)) = (
            parse_counts(toks[end - 2]),
            toks[end - 1]
                .strip_prefix('[')
                .and_then(|x| x.strip_suffix(']'))
                .filter(|x| !x.is_empty() && x.chars().all(|c| c == 'U' || c == '_')),
        ) {
            a.raid_disks = Some(t);
            a.active_disks = Some(act);
            a.member_status = Some(us.to_string());
            end -= 2;
        }
    }
    check_extras(&toks[..end])?;
    // Personalities whose `status` hook prints `[T/A] [U_]`: their blocks line without it is
    // broken.
    let redundant = a
        .level
        .as_deref()
        .is_some_and(|l| crate::model::Level::from(l).prints_member_counts());
    if redundant && a.raid_disks.is_none() {
        return Err(format!(
            "a {} array without `[T/A] [U_]`",
            a.level.as_deref().unwrap_or_default()
        ));
    }
    Ok(())
}

/// `[T/A]` → `(T, A)`.
fn parse_counts(tok: &str) -> Option<(u32, u32)> {
    let inner = tok.strip_prefix('[')?.strip_suffix(']')?;
    let (t, a) = inner.split_once('/')?;
    Some((
        parse_u64(t)?.try_into().ok()?,
        parse_u64(a)?.try_into().ok()?,
    ))
}

/// The personality extras between the metadata and `[T/A]`: raid0 `Nk chunks`, linear `Nk
/// rounding`, raid4/5/6 `level N, Nk chunk, algorithm N`, raid10 `NK chunks`, `N near-copies`,
/// `N far-copies`, `N offset-copies`, `N devices per set`, and the `faulty` test personality's
/// `WriteTransient=N(P)`, `WriteAll`, `nfaults=N`.
fn check_extras(toks: &[&str]) -> Result<(), String> {
    let toks: Vec<&str> = toks.iter().map(|t| t.trim_end_matches(',')).collect();
    let is_num = |s: &str| parse_u64(s).is_some();
    let is_kib = |s: &str| {
        s.strip_suffix(['k', 'K'])
            .is_some_and(|n| parse_u64(n).is_some())
    };
    let mut i = 0;
    while i < toks.len() {
        let at = |k: usize| toks.get(i + k).copied().unwrap_or("");
        let step = if is_kib(at(0)) && matches!(at(1), "chunks" | "rounding") {
            2
        } else if at(0) == "level"
            && is_num(at(1))
            && is_kib(at(2))
            && at(3) == "chunk"
            && at(4) == "algorithm"
            && is_num(at(5))
        {
            6
        } else if is_num(at(0)) && matches!(at(1), "near-copies" | "far-copies" | "offset-copies") {
            2
        } else if is_num(at(0)) && at(1) == "devices" && at(2) == "per" && at(3) == "set" {
            4
        } else if is_faulty_counter(at(0)) {
            1
        } else {
            return Err(format!("unexpected `{}` in the personality status", at(0)));
        };
        i += step;
    }
    Ok(())
}

fn is_faulty_counter(tok: &str) -> bool {
    if tok == "WriteAll" {
        return true;
    }
    let Some((key, val)) = tok.split_once('=') else {
        return false;
    };
    let key_ok = key == "nfaults"
        || ((key.starts_with("Write") || key.starts_with("Read"))
            && key.chars().all(|c| c.is_ascii_alphabetic()));
    let val = match val.split_once('(') {
        Some((n, p)) => {
            p.strip_suffix(')').is_some_and(|p| parse_u64(p).is_some()) && parse_u64(n).is_some()
        }
        None => parse_u64(val).is_some(),
    };
    key_ok && val
}

/// A sync line: `[==>...]  resync = 11.2% (82505280/732571904) finish=197.2min
/// speed=54928K/sec`, or a queued `resync=DELAYED` / `=PENDING` / `=REMOTE`.
fn parse_progress(t: &str) -> Result<SyncStatus, String> {
    let compact: String = t.chars().filter(|c| !c.is_whitespace()).collect();
    if let Some((word, what)) = compact.split_once('=') {
        let state = match what {
            "DELAYED" => Some(SyncState::Delayed),
            "PENDING" => Some(SyncState::Pending),
            "REMOTE" => Some(SyncState::Remote),
            _ => None,
        };
        if let Some(state) = state {
            if word.is_empty() || !word.chars().all(|c| c.is_ascii_lowercase()) {
                return Err(format!("unknown sync action `{word}`"));
            }
            return Ok(SyncStatus {
                action: SyncKind::from(word),
                state,
                percent: None,
                done_kib: None,
                total_kib: None,
                finish_min: None,
                speed_kib_s: None,
            });
        }
    }
    let mut rest = t;
    if let Some(r) = rest.strip_prefix('[') {
        let close = r.find(']').ok_or("unterminated progress bar")?;
        if !r[..close].chars().all(|c| matches!(c, '=' | '>' | '.')) {
            return Err("bad progress bar".into());
        }
        rest = r[close + 1..].trim_start();
    }
    let (action, after) = rest.split_once('=').ok_or("no `action = N%`")?;
    let action = action.trim();
    if action.is_empty() || !action.chars().all(|c| c.is_ascii_lowercase()) {
        return Err(format!("unknown sync action `{action}`"));
    }
    let (pct, after) = after.split_once('%').ok_or("no percentage")?;
    let percent = parse_decimal(pct.trim()).ok_or("the percentage is not a number")?;
    let after = after.trim_start();
    let inner = after.strip_prefix('(').ok_or("no `(done/total)`")?;
    let (counts, after) = inner.split_once(')').ok_or("unterminated `(done/total)`")?;
    let (done, total) = counts.split_once('/').ok_or("no `/` in `(done/total)`")?;
    let done = parse_u64(done.trim()).ok_or("the done count is not a number")?;
    let total = parse_u64(total.trim()).ok_or("the total count is not a number")?;
    let mut finish_min = None;
    let mut speed = None;
    for tok in after.split_whitespace() {
        if let Some(v) = tok
            .strip_prefix("finish=")
            .and_then(|v| v.strip_suffix("min"))
        {
            finish_min = Some(parse_decimal(v).ok_or("the finish time is not a number")?);
        } else if let Some(v) = tok
            .strip_prefix("speed=")
            .and_then(|v| v.strip_suffix("K/sec"))
        {
            speed = Some(parse_u64(v).ok_or("the speed is not a number")?);
        } else {
            return Err(format!("unexpected `{tok}` on the sync line"));
        }
    }
    Ok(SyncStatus {
        action: SyncKind::from(action),
        state: SyncState::Running,
        percent: Some(percent),
        done_kib: Some(done),
        total_kib: Some(total),
        finish_min,
        speed_kib_s: speed,
    })
}

/// `bitmap: U/T pages [MKB], CKB chunk[, file: PATH]` (a chunk under 1 KiB prints in `B`).
fn parse_bitmap(t: &str) -> Result<Bitmap, String> {
    let rest = t
        .strip_prefix("bitmap")
        .and_then(|r| r.trim_start().strip_prefix(':'))
        .ok_or("expected `bitmap:`")?;
    let (main, file) = match rest.find("file:") {
        Some(p) => (
            rest[..p].trim_end().trim_end_matches(','),
            Some(unescape_path(rest[p + 5..].trim())),
        ),
        None => (rest, None),
    };
    let main = main.replace(',', " ");
    let toks: Vec<&str> = main.split_whitespace().collect();
    let [pages, "pages", mem, chunk, "chunk"] = toks.as_slice() else {
        return Err("expected `U/T pages [MKB], CKB chunk`".into());
    };
    let (used, total) = pages.split_once('/').ok_or("expected `U/T pages`")?;
    let pages_used = parse_u64(used).ok_or("pages used is not a number")?;
    let pages_total = parse_u64(total).ok_or("pages total is not a number")?;
    let memory_kib = mem
        .strip_prefix('[')
        .and_then(|m| m.strip_suffix("KB]"))
        .and_then(parse_u64)
        .ok_or("expected `[NKB]`")?;
    let chunk_bytes = if let Some(k) = chunk.strip_suffix("KB") {
        parse_u64(k).and_then(|k| k.checked_mul(1024))
    } else {
        chunk.strip_suffix('B').and_then(parse_u64)
    }
    .ok_or("expected `NKB chunk` or `NB chunk`")?;
    if matches!(&file, Some(f) if f.is_empty()) {
        return Err("`file:` without a path".into());
    }
    Ok(Bitmap {
        pages_used,
        pages_total,
        memory_kib,
        chunk_bytes,
        file,
    })
}

/// Undoes `seq_file_path`'s escaping of space, TAB and newline as `\ooo`.
fn unescape_path(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(p) = rest.find('\\') {
        out.push_str(&rest[..p]);
        let oct = rest.get(p + 1..p + 4);
        match oct.and_then(|o| u8::from_str_radix(o, 8).ok()) {
            Some(b) if oct.is_some_and(|o| o.bytes().all(|c| (b'0'..=b'7').contains(&c))) => {
                out.push(char::from(b));
                rest = &rest[p + 4..];
            }
            _ => {
                out.push('\\');
                rest = &rest[p + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Decimal digits only (no sign, no `+`): `u64::from_str` alone would accept `+5`.
fn parse_u64(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `12`, `12.5`: digits with at most one dot (`f64::from_str` would accept `inf` and `NaN`).
fn parse_decimal(s: &str) -> Option<f64> {
    let digits = s.bytes().filter(u8::is_ascii_digit).count();
    let dots = s.bytes().filter(|&b| b == b'.').count();
    if digits == 0 || dots > 1 || digits + dots != s.len() {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_with_slash_and_flags() {
        let m = parse_member("cciss/c0d0p1[12](W)(F)").unwrap();
        assert_eq!(m.name, "cciss/c0d0p1");
        assert_eq!(m.slot, 12);
        assert_eq!(m.flags, vec![MemberFlag::WriteMostly, MemberFlag::Faulty]);
        assert!(parse_member("sdj2[X]").is_err());
        assert!(parse_member("[0]").is_err());
        assert!(parse_member("sda[0](Q)").is_err());
    }

    #[test]
    fn numbers_are_strict() {
        assert_eq!(parse_u64("+5"), None);
        assert_eq!(parse_decimal("inf"), None);
        assert_eq!(parse_decimal("NaN"), None);
        assert_eq!(parse_decimal("0.4"), Some(0.4));
        assert_eq!(parse_decimal("1.2.3"), None);
    }

    #[test]
    fn bitmap_file_path_is_unescaped() {
        let b =
            parse_bitmap("bitmap: 1/8 pages [4KB], 512B chunk, file: /var/md\\040bitmap").unwrap();
        assert_eq!(b.chunk_bytes, 512);
        assert_eq!(b.file.as_deref(), Some("/var/md bitmap"));
    }

    #[test]
    fn progress_with_padded_percent() {
        let s = parse_progress(
            "[>....................]  recovery =  0.4% (1024/208704) finish=276.9min speed=12K/sec",
        )
        .unwrap();
        assert_eq!(s.percent, Some(0.4));
        assert_eq!(s.done_kib, Some(1024));
        assert_eq!(s.speed_kib_s, Some(12));
        let q = parse_progress("\tresync=REMOTE").unwrap();
        assert_eq!(q.state, SyncState::Remote);
    }
}
