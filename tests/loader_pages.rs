//! `WeightPages::HugePages` (the default of `run` and `bench`): the model's bytes copied into
//! transparent huge pages are the file's bytes, and the weights' digest holds on them.

mod generate_util;

use cyb_llm::{load, load_with, WeightPages};
use generate_util::model_path;

#[test]
fn huge_page_copy_holds_the_files_bytes() {
    let path = model_path("smollm2");
    let file = std::fs::read(&path).unwrap();
    let mapped = load(&path).unwrap();
    let huge = load_with(&path, WeightPages::HugePages).unwrap();
    assert!(
        huge.file_bytes() == &file[..],
        "the huge-page copy differs from the file"
    );
    assert!(mapped.file_bytes() == &file[..]);
    assert!(
        huge.verify_weights().unwrap(),
        "the weights' digest fails on the copy"
    );
    assert_eq!(huge.tensors.len(), mapped.tensors.len());
}
