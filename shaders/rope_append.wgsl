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

// Where element i of an [S, heads, d] tensor takes its rotation from:
// (first partner, second partner, table index, whether i is the first of
// its pair, whether it is rotated at all).
struct Pair {
    i1: u32,
    i2: u32,
    t: u32,
    first: bool,
    rotated: bool,
}

fn pair_of(i: u32, heads: u32) -> Pair {
    let d = p.a.w;
    let rot = p.b.y;
    let half = rot / 2u;
    let j = i % d;
    let row = i - j;
    let s = i / (heads * d);
    var pr = Pair(i, i, 0u, true, j < rot);
    if !pr.rotated {
        return pr;
    }
    var pair: u32;
    if p.b.z == 0u {
        pr.first = j < half;
        pair = select(j - half, j, pr.first);
        pr.i1 = row + pair;
        pr.i2 = row + pair + half;
    } else {
        pr.first = (j & 1u) == 0u;
        pair = j / 2u;
        pr.i1 = row + 2u * pair;
        pr.i2 = pr.i1 + 1u;
    }
    pr.t = (p.b.w + s) * half + pair;
    return pr;
}

fn turn(pr: Pair, x1: f32, x2: f32) -> f32 {
    let c = cs[pr.t];
    let sv = sn[pr.t];
    return select(x1 * sv + x2 * c, x1 * c - x2 * sv, pr.first);
}

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
