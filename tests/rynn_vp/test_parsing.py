import pytest

from dagster_project.rynn_vp.parsing import ParseError, parse_case_id, parse_interval


@pytest.mark.parametrize(
    ("case_id", "scene", "room", "task", "variant", "instance"),
    [
        ("source1_1-Bedroom-Room_03-Task_02-Variant_07-001", "Bedroom", "Room_03", 2, 7, 1),
        ("source1_2-Home Office-Room_02-Task_04-Variant_01-012", "Home Office", "Room_02", 4, 1, 12),
        ("source2_1-Living_Room-Room_11-Task_10-Variant_03-003", "Living_Room", "Room_11", 10, 3, 3),
        # A hyphen inside a scene label still parses: the id is read from both ends.
        ("source2_2-Walk-in Closet-Room_01-Task_01-Variant_01-001", "Walk-in Closet", "Room_01",
         1, 1, 1),
    ],
)
def test_case_id_parsed_from_both_ends(case_id, scene, room, task, variant, instance):
    parsed = parse_case_id(case_id)
    assert parsed.scene == scene
    assert parsed.room_id == room
    assert (parsed.task_no, parsed.variant_no, parsed.instance_no) == (task, variant, instance)
    assert parsed.source_group == case_id.split("-")[0]


@pytest.mark.parametrize(
    "bad",
    ["source1_1-Bedroom-Room_03-Task_02-Variant_07",  # too few parts
     "src-Bedroom-Room_03-Task_02-Variant_07-001",  # source group
     "source1_1-Bedroom-Rm_03-Task_02-Variant_07-001",
     "source1_1--Room_03-Task_02-Variant_07-001",  # empty scene
     "source1_1-Bedroom-Room_03-Task_02-Variant_07-abc"],
)
def test_malformed_case_ids_are_refused_with_the_part_named(bad):
    with pytest.raises(ParseError, match="case id"):
        parse_case_id(bad)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0.0s-2.2s", (0.0, 2.2)), ("12.5s-13s", (12.5, 13.0)), (" 3.1s - 4.0s ", (3.1, 4.0)),
     ("41.3s-45.108s", (41.3, 45.108))],
)
def test_interval_strings(text, expected):
    assert parse_interval(text) == expected


@pytest.mark.parametrize("bad", ["0.0s to 2.2s", "abc", "2.2s-1.0s", "-1s-2s", "1.0s-", ""])
def test_unparsable_intervals(bad):
    with pytest.raises(ParseError):
        parse_interval(bad)
