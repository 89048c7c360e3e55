// RoPE on x [S, H, d] with cos/sin tables of rot/2 values per position, rows
// b.w .. b.w + S used. a = (S, H, _, d), b = (_, rot, style: 0 neox / 1
// normal, first table row). The pairing is rope_pair.wgsl (appended).
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> cs: array<f32>;
@group(0) @binding(2) var<storage, read> sn: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = flat_index(gid);
    if i >= p.a.x * p.a.y * p.a.w {
        return;
    }
    let pr = pair_of(i, p.a.y);
    y[i] = select(x[i], turn(pr, x[pr.i1], x[pr.i2]), pr.rotated);
}
