// FusedRopeAppend in one dispatch: RoPE of q into q_out, RoPE of k into the
// key cache at the current position, v copied into the value cache.
// q [S, H, d], k [S, Hkv, d], v [S, Hkv, dv]; cos/sin tables of rot/2 values
// per position, rows b.w .. b.w + S used. a = (S, H, Hkv, d),
// b = (dv, rot, style: 0 neox / 1 normal, first table row), c = (first key
// slot, first value slot) in the caches.
@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> k: array<f32>;
@group(0) @binding(2) var<storage, read> v: array<f32>;
@group(0) @binding(3) var<storage, read> cs: array<f32>;
@group(0) @binding(4) var<storage, read> sn: array<f32>;
@group(0) @binding(5) var<storage, read_write> q_out: array<f32>;
@group(0) @binding(6) var<storage, read_write> k_cache: array<f32>;
@group(0) @binding(7) var<storage, read_write> v_cache: array<f32>;
@group(0) @binding(8) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = flat_index(gid);
    let rows = p.a.x;
    let d = p.a.w;
    if i < rows * p.a.y * d {
        let pr = pair_of(i, p.a.y);
        q_out[i] = select(q[i], turn(pr, q[pr.i1], q[pr.i2]), pr.rotated);
    }
    if i < rows * p.a.z * d {
        let pr = pair_of(i, p.a.z);
        k_cache[p.c.x + i] = select(k[i], turn(pr, k[pr.i1], k[pr.i2]), pr.rotated);
    }
    if i < rows * p.a.z * p.b.x {
        v_cache[p.c.y + i] = v[i];
    }
}
