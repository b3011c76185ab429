-- A small pets database for the InterCode-SQL tests (SQLite dialect, portable constructs).
CREATE TABLE student (
  stuid INTEGER PRIMARY KEY,
  lname VARCHAR(20),
  fname VARCHAR(20),
  age INTEGER,
  sex VARCHAR(1),
  city_code VARCHAR(3)
);
CREATE TABLE pets (
  petid INTEGER PRIMARY KEY,
  pettype VARCHAR(20),
  pet_age INTEGER,
  weight REAL
);
CREATE TABLE has_pet (
  stuid INTEGER REFERENCES student (stuid),
  petid INTEGER REFERENCES pets (petid)
);
INSERT INTO student VALUES (1001, 'Smith', 'Linda', 18, 'F', 'BAL');
INSERT INTO student VALUES (1002, 'Kim', 'Tracy', 19, 'F', 'HKG');
INSERT INTO student VALUES (1003, 'Jones', 'Shiela', 21, 'F', 'WAS');
INSERT INTO student VALUES (1004, 'Kumar', 'Dinesh', 20, 'M', 'WAS');
INSERT INTO student VALUES (1005, 'Gompers', 'Paul', 26, 'M', 'YYZ');
INSERT INTO pets VALUES (2001, 'cat', 3, 12.0);
INSERT INTO pets VALUES (2002, 'dog', 2, 13.4);
INSERT INTO pets VALUES (2003, 'dog', 1, 9.3);
INSERT INTO has_pet VALUES (1001, 2001);
INSERT INTO has_pet VALUES (1002, 2002);
INSERT INTO has_pet VALUES (1002, 2003);
