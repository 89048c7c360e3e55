// One strided copy over an index space of up to 6 dims (src/backend/wgpu/layout.rs):
// y[dst0 + sum c_d dst_d] = x[src0 + sum c_d src_d] for every index c, or
// y[..] = value when `fill` is set. a = (count, src0 (i32), dst0, fill),
// b, c.xy = dims; c.zw, d = source strides (i32); e, f.xy = destination
// strides; f.z = value (bitcast f32).
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = flat_index(gid);
    if i >= p.a.x {
        return;
    }
    var dims = array<u32, 6>(p.b.x, p.b.y, p.b.z, p.b.w, p.c.x, p.c.y);
    var src = array<u32, 6>(p.c.z, p.c.w, p.d.x, p.d.y, p.d.z, p.d.w);
    var dst = array<u32, 6>(p.e.x, p.e.y, p.e.z, p.e.w, p.f.x, p.f.y);
    var rest = i;
    var s = bitcast<i32>(p.a.y);
    var d = p.a.z;
    for (var k = 5; k >= 0; k--) {
        let c = rest % dims[k];
        rest = rest / dims[k];
        s += i32(c) * bitcast<i32>(src[k]);
        d += c * dst[k];
    }
    if p.a.w == 1u {
        y[d] = bitcast<f32>(p.f.z);
    } else {
        y[d] = x[u32(s)];
    }
}
