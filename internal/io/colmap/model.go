package colmap

// CameraModel describes one COLMAP camera model.
type CameraModel struct {
	ID        int32
	Name      string
	NumParams int
	// NumFocal is how many focal lengths lead the parameters: 1 (f), 2
	// (fx fy), or 0 for a model with no pinhole intrinsics
	// (EQUIRECTANGULAR). The principal point (cx cy) follows the focal
	// lengths; the distortion parameters follow it.
	NumFocal int
}

// cameraModels is COLMAP's model table (src/colmap/sensor/models.h), by id.
// It is a function returning an array value, not a package variable, so
// that no caller can alter it.
func cameraModels() [18]CameraModel {
	return [18]CameraModel{
		{0, "SIMPLE_PINHOLE", 3, 1},
		{1, "PINHOLE", 4, 2},
		{2, "SIMPLE_RADIAL", 4, 1},
		{3, "RADIAL", 5, 1},
		{4, "OPENCV", 8, 2},
		{5, "OPENCV_FISHEYE", 8, 2},
		{6, "FULL_OPENCV", 12, 2},
		{7, "FOV", 5, 2},
		{8, "SIMPLE_RADIAL_FISHEYE", 4, 1},
		{9, "RADIAL_FISHEYE", 5, 1},
		{10, "THIN_PRISM_FISHEYE", 12, 2},
		{11, "RAD_TAN_THIN_PRISM_FISHEYE", 16, 2},
		// Newer COLMAP releases than the 3.8 that wrote ../shared add these;
		// reading them lets such models load.
		{12, "SIMPLE_DIVISION", 4, 1},
		{13, "DIVISION", 5, 2},
		{14, "SIMPLE_FISHEYE", 3, 1},
		{15, "FISHEYE", 4, 2},
		{16, "EUCM", 6, 2},
		{17, "EQUIRECTANGULAR", 2, 0},
	}
}

// CameraModels returns every camera model COLMAP defines, by id.
func CameraModels() []CameraModel {
	t := cameraModels()
	return t[:]
}

// ModelByID returns the camera model with the given COLMAP id.
func ModelByID(id int32) (CameraModel, bool) {
	t := cameraModels()
	if id < 0 || int(id) >= len(t) {
		return CameraModel{}, false
	}
	return t[id], true
}

// ModelByName returns the camera model with the given COLMAP name
// (case-sensitive, as COLMAP writes it).
func ModelByName(name string) (CameraModel, bool) {
	for _, m := range cameraModels() {
		if m.Name == name {
			return m, true
		}
	}
	return CameraModel{}, false
}

// Camera is one entry of cameras.bin / cameras.txt.
type Camera struct {
	ID            uint32
	Model         string // COLMAP model name, e.g. "PINHOLE"
	Width, Height uint64
	Params        []float64
}

// Image is one entry of images.bin / images.txt. Q and T give the
// world-to-camera pose (Q as w,x,y,z).
type Image struct {
	ID       uint32
	Q        [4]float64
	T        [3]float64
	CameraID uint32
	Name     string
	Points2D []Point2D
}

// Point2D is one keypoint of an image; Point3DID is -1 when unmatched.
type Point2D struct {
	X, Y      float64
	Point3DID int64
}

// Point3D is one entry of points3D.bin / points3D.txt.
type Point3D struct {
	ID    uint64
	XYZ   [3]float64
	RGB   [3]uint8
	Error float64
	Track []TrackElem
}

// TrackElem names an observation of a 3D point.
type TrackElem struct {
	ImageID    uint32
	Point2DIdx uint32
}

// Model is a whole sparse reconstruction.
type Model struct {
	Cameras map[uint32]Camera
	Images  []Image // sorted by Name
	Points  []Point3D
}
