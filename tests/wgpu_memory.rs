//! GPU memory of the wgpu backend does not grow when a model is loaded and
//! dropped again and again on one device (lavapipe in CI): SmolLM2's weights
//! are bound zero-copy from the `.model` file, every matrix is uploaded by
//! an embedding lookup, a KV cache is allocated, then everything is dropped.
//! Memory is the device allocator's own count of live allocations
//! ([`WgpuBackend::gpu_memory_bytes`]), next to the frame allocator's pool.

mod generate_util;

use cyb_llm::backend::wgpu::{kernel_dtype, WgpuBackend};
use cyb_llm::backend::{Backend, ExecContext, Op, SharedBytes, Tensor};
use cyb_llm::loader::{self, Model};
use generate_util::model_path;
use std::sync::Arc;

/// The model's file bytes as a shared owner (what the curated engine binds).
struct FileBytes(Arc<Model>);

impl AsRef<[u8]> for FileBytes {
    fn as_ref(&self) -> &[u8] {
        self.0.file_bytes()
    }
}

/// What one load put on the GPU.
struct Loaded {
    /// Bytes of the matrices uploaded (their encoded size in the file).
    weights: u64,
    /// Matrices uploaded.
    matrices: usize,
    /// The device allocator's count while everything was alive.
    gpu_bytes: u64,
    /// Weights the backend held while everything was alive.
    cached: usize,
}

/// Loads the model, puts every matrix on the GPU and allocates a KV cache;
/// measures the GPU while all of it is alive. Everything is dropped on return.
fn load_run_drop(g: &WgpuBackend, path: &std::path::Path) -> Loaded {
    let model = Arc::new(loader::load(path).expect("model loads"));
    let owner: Arc<dyn AsRef<[u8]> + Send + Sync> = Arc::new(FileBytes(model.clone()));
    let base = model.file_bytes().as_ptr() as usize;
    let mut ctx = ExecContext::new(1);
    let mut uploaded = 0;
    let mut matrices = 0;
    let mut outputs = Vec::new();
    for e in model.tensors.entries() {
        if e.shape.len() != 2 || !kernel_dtype(e.dtype) {
            continue;
        }
        let t = model.tensor_of(e);
        let start = t.bytes.as_ptr() as usize - base;
        let bytes = SharedBytes::new(owner.clone(), start..start + t.bytes.len()).unwrap();
        let w = Tensor::from_bytes(&e.shape, e.dtype, bytes, e.scale).unwrap();
        let ids = Tensor::from_i32(&[1], vec![0]).unwrap();
        outputs.extend(g.execute(&Op::Embed, &[ids, w], &mut ctx).unwrap());
        uploaded += e.size;
        matrices += 1;
    }
    assert!(uploaded > 0, "no matrix of {path:?} was uploaded");
    let kv = g.alloc(&[256, 3 * 64], cyb_llm::DType::F32).unwrap();
    // Finish the work (reads one output back) before dropping.
    let last = outputs.last().unwrap();
    assert!(g
        .try_download_f32(last)
        .unwrap()
        .iter()
        .all(|v| v.is_finite()));
    let loaded = Loaded {
        weights: uploaded,
        matrices,
        gpu_bytes: g.gpu_memory_bytes().unwrap(),
        cached: g.cached_weights(),
    };
    drop((kv, outputs, owner, model));
    loaded
}

#[test]
fn load_and_drop_20_times_does_not_grow_gpu_memory() {
    let g = WgpuBackend::new()
        .unwrap_or_else(|e| panic!("wgpu tests need a Vulkan adapter (CI installs lavapipe): {e}"));
    let path = model_path("smollm2");
    let idle = g
        .gpu_memory_bytes()
        .expect("the adapter's allocator reports its memory");
    let mut after = Vec::new();
    for i in 0..20 {
        let l = load_run_drop(&g, &path);
        // The weights really were on the GPU (so growth would show): the
        // device allocator held at least their bytes on top of the idle
        // count, and the backend held each matrix.
        assert!(
            l.gpu_bytes >= idle + l.weights,
            "iteration {i}: {} bytes of weights uploaded but the GPU held only {} over idle",
            l.weights,
            l.gpu_bytes.saturating_sub(idle)
        );
        assert_eq!(
            l.cached, l.matrices,
            "iteration {i}: weights held on the GPU"
        );
        assert_eq!(g.cached_weights(), 0, "iteration {i}: weights still cached");
        let now = g.gpu_memory_bytes().unwrap();
        eprintln!(
            "iteration {i}: uploaded {} bytes in {} matrices; GPU memory loaded {}, after drop {now} \
             (idle {idle}); frame pool {:?}",
            l.weights,
            l.matrices,
            l.gpu_bytes,
            g.frame_pool()
        );
        after.push((now, g.frame_pool()));
    }
    // Frame buffers released during one batch are reused from the next one,
    // so the pool holds two loads' outputs from the second load on: the
    // steady state starts there.
    let (first, pool) = after[1];
    for (i, (now, p)) in after.iter().enumerate().skip(1) {
        assert!(
            *now <= first,
            "iteration {i}: GPU memory {now} grew past {first} (after the second load)"
        );
        assert_eq!(*p, pool, "iteration {i}: the frame pool grew");
    }
    assert!(
        first < idle + (8 << 20),
        "after dropping the model {first} bytes stay allocated (idle {idle})"
    );
}

/// The measurement sees weights while they are loaded (so the test above can fail).
#[test]
fn loaded_weights_show_in_gpu_memory() {
    let g = WgpuBackend::new()
        .unwrap_or_else(|e| panic!("wgpu tests need a Vulkan adapter (CI installs lavapipe): {e}"));
    let before = g.gpu_memory_bytes().unwrap();
    let w = Tensor::from_bytes(
        &[1024, 1024],
        cyb_llm::DType::F32,
        SharedBytes::from_vec(vec![0u8; 4 << 20]),
        None,
    )
    .unwrap();
    let ids = Tensor::from_i32(&[1], vec![3]).unwrap();
    let mut ctx = ExecContext::new(1);
    let y = g.execute(&Op::Embed, &[ids, w.clone()], &mut ctx).unwrap();
    assert_eq!(g.try_download_f32(&y[0]).unwrap().len(), 1024);
    let loaded = g.gpu_memory_bytes().unwrap();
    assert!(
        loaded >= before + (4 << 20),
        "4 MiB weight not counted: {before} -> {loaded}"
    );
    drop((w, y));
    let dropped = g.gpu_memory_bytes().unwrap();
    assert!(
        dropped + (4 << 20) <= loaded,
        "4 MiB weight not freed: {loaded} -> {dropped}"
    );
}
