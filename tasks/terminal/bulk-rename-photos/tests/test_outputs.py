import os
from pathlib import Path

APP = Path(os.environ.get("APP_DIR", "/app"))
PHOTOS = APP / "photos"
RENAMED = {
    "photo_0001.jpg": "IMG_0001.JPG",
    "photo_0002.jpg": "IMG_0002.jpeg",
    "photo_0003.jpg": "img_0003.Jpg",
    "photo_0004.png": "IMG_0004.png",
    "photo_0005.png": "Img_0005.PNG",
    "photo_0006.jpg": "IMG_0006.JPEG",
    "photo_0010.jpg": "IMG_0010.jpg",
}
UNTOUCHED = {
    "notes.txt": "remember to back up\n",
    "IMG_0007.CR2": "raw\n",
    "beach day.jpg": "holiday photo\n",
}


def names():
    return {p.name for p in PHOTOS.iterdir()}


def test_renamed_files_exist():
    missing = set(RENAMED) - names()
    assert not missing, f"missing: {sorted(missing)}"


def test_old_names_gone():
    left = set(RENAMED.values()) & names()
    assert not left, f"still present: {sorted(left)}"


def test_contents_preserved():
    for new, old in RENAMED.items():
        assert (PHOTOS / new).read_text() == f"image data for {old}\n", new


def test_other_files_untouched():
    for name, text in UNTOUCHED.items():
        assert (PHOTOS / name).read_text() == text, name


def test_nothing_else_in_folder():
    assert names() == set(RENAMED) | set(UNTOUCHED)
