//! Text to phonemes grouped by sentence, as Piper does it.
//!
//! espeak-ng reads the text one clause at a time. Each clause's IPA gets its
//! ending punctuation appended (`.` `?` `!` end a sentence; `,` `:` `;` are
//! followed by a space and do not); language-switch flags such as `(fr)` are
//! removed; the result is split into Unicode code points after NFD
//! decomposition, with the voice's vowel clusters merged back into one symbol.

use super::espeak::{self, Clause};
use super::SpeakError;
use std::collections::BTreeSet;
use unicode_normalization::UnicodeNormalization;

/// The punctuation that ended a clause, as espeak-ng classifies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Terminator {
    /// `.` (also an ideographic or full-width period): ends a sentence.
    Period,
    /// `?`: ends a sentence.
    Question,
    /// `!`: ends a sentence.
    Exclamation,
    /// `,`
    Comma,
    /// `:`
    Colon,
    /// `;`, and the dashes `–` `—`, which espeak-ng reads as one.
    Semicolon,
}

impl Terminator {
    /// The symbol Piper appends to the clause's phonemes (a space follows the
    /// non-final ones).
    pub fn symbol(self) -> &'static str {
        match self {
            Terminator::Period => ".",
            Terminator::Question => "?",
            Terminator::Exclamation => "!",
            Terminator::Comma => ", ",
            Terminator::Colon => ": ",
            Terminator::Semicolon => "; ",
        }
    }

    /// Whether a sentence ends here.
    pub fn ends_sentence(self) -> bool {
        matches!(
            self,
            Terminator::Period | Terminator::Question | Terminator::Exclamation
        )
    }
}

/// Closing quotes and brackets that may follow a clause's punctuation.
fn is_closer(c: char) -> bool {
    matches!(
        c,
        '"' | '\'' | ')' | ']' | '}' | '\u{201d}' | '\u{2019}' | '\u{00bb}'
    )
}

/// The punctuation that ends a clause's consumed text, if any. An ellipsis
/// (`…` or three dots) is a pause with no punctuation, as Piper reads it.
pub fn terminator(clause_text: &str) -> Option<Terminator> {
    let text = clause_text.trim_end_matches(|c: char| c.is_whitespace() || is_closer(c));
    let last = text.chars().last()?;
    Some(match last {
        '.' if text.ends_with("..") => return None,
        '.' | '\u{3002}' | '\u{ff0e}' | '\u{0964}' => Terminator::Period,
        '?' | '\u{ff1f}' | '\u{037e}' => Terminator::Question,
        '!' | '\u{ff01}' => Terminator::Exclamation,
        ',' | '\u{3001}' | '\u{ff0c}' => Terminator::Comma,
        ':' | '\u{ff1a}' => Terminator::Colon,
        ';' | '\u{ff1b}' | '\u{0387}' | '\u{2013}' | '\u{2014}' => Terminator::Semicolon,
        _ => return None,
    })
}

/// Removes espeak-ng's language-switch flags, e.g. `(fr)` and `(en)`.
fn strip_language_flags(phonemes: &str) -> String {
    let mut out = String::with_capacity(phonemes.len());
    let mut rest = phonemes;
    while let Some(open) = rest.find('(') {
        match rest[open + 1..].find(')') {
            Some(len) if len > 0 => {
                out.push_str(&rest[..open]);
                rest = &rest[open + 1 + len + 1..];
            }
            _ => {
                out.push_str(&rest[..=open]);
                rest = &rest[open + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Piper's grouping of espeak-ng clauses into sentences of phoneme symbols.
pub fn sentences_from_clauses(
    clauses: &[Clause],
    vowel_clusters: &BTreeSet<Vec<String>>,
) -> Vec<Vec<String>> {
    let mut sentences = Vec::new();
    let mut current = String::new();
    let finish = |text: &mut String, out: &mut Vec<Vec<String>>| {
        let symbols: Vec<String> = text.nfd().map(String::from).collect();
        out.push(merge_vowel_clusters(symbols, vowel_clusters));
        text.clear();
    };
    for clause in clauses {
        current.push_str(&strip_language_flags(&clause.phonemes));
        let ending = terminator(&clause.text);
        if let Some(t) = ending {
            current.push_str(t.symbol());
        }
        if ending.is_some_and(Terminator::ends_sentence) {
            finish(&mut current, &mut sentences);
        }
    }
    if !current.is_empty() {
        finish(&mut current, &mut sentences);
    }
    sentences
}

/// Merges runs of symbols that form one of the voice's vowel clusters, longest first.
fn merge_vowel_clusters(symbols: Vec<String>, clusters: &BTreeSet<Vec<String>>) -> Vec<String> {
    let Some(longest) = clusters.iter().map(Vec::len).max() else {
        return symbols;
    };
    let mut out = Vec::with_capacity(symbols.len());
    let mut i = 0;
    while i < symbols.len() {
        let matched = (2..=longest.min(symbols.len() - i))
            .rev()
            .find(|&n| clusters.contains(&symbols[i..i + n]));
        match matched {
            Some(n) => {
                out.push(symbols[i..i + n].concat());
                i += n;
            }
            None => {
                out.push(symbols[i].clone());
                i += 1;
            }
        }
    }
    out
}

/// Phonemizes `text` with espeak-ng `voice`, one symbol list per sentence.
pub fn espeak_sentences(
    voice: &str,
    text: &str,
    vowel_clusters: &BTreeSet<Vec<String>>,
) -> Result<Vec<Vec<String>>, SpeakError> {
    let clauses = espeak::clauses(voice, text)?;
    Ok(sentences_from_clauses(&clauses, vowel_clusters))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clause(phonemes: &str, text: &str) -> Clause {
        Clause {
            phonemes: phonemes.into(),
            text: text.into(),
        }
    }

    #[test]
    fn terminators_follow_espeak_classes() {
        assert_eq!(terminator("Wow! "), Some(Terminator::Exclamation));
        assert_eq!(terminator("She said: "), Some(Terminator::Colon));
        assert_eq!(terminator("now.\""), Some(Terminator::Period));
        assert_eq!(terminator("agree — "), Some(Terminator::Semicolon));
        assert_eq!(terminator("Well... "), None);
        assert_eq!(terminator("the end…"), None);
        assert_eq!(terminator("a clause cut for length"), None);
    }

    #[test]
    fn clauses_group_into_sentences_with_punctuation() {
        let clauses = [
            clause("wˈaʊ", "Wow! "),
            clause("ðæts(fr)ɐ(en)", "That's, "),
            clause("nˈaʊ", "now"),
        ];
        let got = sentences_from_clauses(&clauses, &BTreeSet::new());
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].concat(), "wˈaʊ!");
        assert_eq!(got[1].concat(), "ðætsɐ, nˈaʊ");
    }

    #[test]
    fn vowel_clusters_merge_longest_first() {
        let clusters: BTreeSet<Vec<String>> = [vec!["a".into(), "ʊ".into()]].into();
        let got = merge_vowel_clusters(["b", "a", "ʊ", "a"].map(String::from).to_vec(), &clusters);
        assert_eq!(got, ["b", "aʊ", "a"]);
    }
}
