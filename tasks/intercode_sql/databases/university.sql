-- University database: departments, instructors, courses, students and enrollments.
CREATE TABLE department (
  dept_id INTEGER PRIMARY KEY,
  dept_name TEXT NOT NULL,
  building TEXT NOT NULL,
  budget INTEGER NOT NULL
);

CREATE TABLE instructor (
  instructor_id INTEGER PRIMARY KEY,
  first_name TEXT NOT NULL,
  last_name TEXT NOT NULL,
  dept_id INTEGER NOT NULL,
  salary INTEGER NOT NULL,
  hire_date TEXT NOT NULL,
  FOREIGN KEY (dept_id) REFERENCES department (dept_id)
);

CREATE TABLE course (
  course_id INTEGER PRIMARY KEY,
  course_code TEXT NOT NULL,
  title TEXT NOT NULL,
  dept_id INTEGER NOT NULL,
  credits INTEGER NOT NULL,
  FOREIGN KEY (dept_id) REFERENCES department (dept_id)
);

CREATE TABLE student (
  student_id INTEGER PRIMARY KEY,
  first_name TEXT NOT NULL,
  last_name TEXT NOT NULL,
  major_dept_id INTEGER NOT NULL,
  entry_year INTEGER NOT NULL,
  gpa REAL NOT NULL,
  FOREIGN KEY (major_dept_id) REFERENCES department (dept_id)
);

CREATE TABLE enrollment (
  enrollment_id INTEGER PRIMARY KEY,
  student_id INTEGER NOT NULL,
  course_id INTEGER NOT NULL,
  instructor_id INTEGER NOT NULL,
  semester TEXT NOT NULL,
  score INTEGER NOT NULL,
  letter_grade TEXT NOT NULL,
  FOREIGN KEY (student_id) REFERENCES student (student_id),
  FOREIGN KEY (course_id) REFERENCES course (course_id),
  FOREIGN KEY (instructor_id) REFERENCES instructor (instructor_id)
);

INSERT INTO department (dept_id, dept_name, building, budget) VALUES
  (1, 'Computer Science', 'Turing Hall', 1250000),
  (2, 'Mathematics', 'Euler Building', 860000),
  (3, 'Physics', 'Curie Center', 1100000),
  (4, 'History', 'Gibbon House', 420000),
  (5, 'Economics', 'Keynes Hall', 730000),
  (6, 'Biology', 'Darwin Labs', 980000),
  (7, 'Philosophy', 'Gibbon House', 310000),
  (8, 'Chemistry', 'Curie Center', 940000),
  (9, 'Linguistics', 'Sapir Annex', 280000),
  (10, 'Music', 'Bach Pavilion', 350000);

INSERT INTO instructor (instructor_id, first_name, last_name, dept_id, salary, hire_date) VALUES
  (1, 'Alan', 'Whitfield', 1, 128000, '2009-08-15'),
  (2, 'Grace', 'Okafor', 1, 119000, '2014-01-10'),
  (3, 'Lena', 'Marsh', 2, 98000, '2011-09-01'),
  (4, 'Victor', 'Ramos', 2, 91000, '2017-08-20'),
  (5, 'Irene', 'Kowalski', 3, 112000, '2006-07-01'),
  (6, 'Samuel', 'Brennan', 4, 76000, '2012-01-05'),
  (7, 'Priya', 'Nair', 5, 104000, '2015-08-25'),
  (8, 'Tomas', 'Lindqvist', 6, 95000, '2018-01-15'),
  (9, 'Helen', 'Carter', 7, 72000, '2003-09-01'),
  (10, 'Marcus', 'Bell', 8, 99000, '2013-08-18'),
  (11, 'Nadia', 'Haddad', 3, 108000, '2019-01-07'),
  (12, 'Oscar', 'Fenwick', 6, 88000, '2021-08-23'),
  (13, 'Yuki', 'Tanaka', 1, 134000, '2020-01-13'),
  (14, 'Rachel', 'Stein', 5, 97000, '2010-08-30'),
  (15, 'Daniel', 'Moreau', 9, 69000, '2016-09-05');

INSERT INTO course (course_id, course_code, title, dept_id, credits) VALUES
  (1, 'CS101', 'Introduction to Programming', 1, 4),
  (2, 'CS201', 'Data Structures', 1, 4),
  (3, 'CS340', 'Databases', 1, 3),
  (4, 'CS450', 'Machine Learning', 1, 3),
  (5, 'MA110', 'Calculus I', 2, 4),
  (6, 'MA220', 'Linear Algebra', 2, 3),
  (7, 'MA330', 'Probability Theory', 2, 3),
  (8, 'PH101', 'Classical Mechanics', 3, 4),
  (9, 'PH250', 'Quantum Physics', 3, 4),
  (10, 'HI120', 'Medieval Europe', 4, 3),
  (11, 'EC101', 'Principles of Microeconomics', 5, 3),
  (12, 'EC310', 'Econometrics', 5, 4),
  (13, 'BI150', 'Cell Biology', 6, 4),
  (14, 'PL100', 'Introduction to Logic', 7, 2),
  (15, 'CH110', 'General Chemistry', 8, 4),
  (16, 'LI200', 'Phonetics', 9, 2),
  (17, 'MU105', 'Music Theory', 10, 2);

INSERT INTO student (student_id, first_name, last_name, major_dept_id, entry_year, gpa) VALUES
  (1, 'Emma', 'Johansson', 1, 2021, 3.82),
  (2, 'Liam', 'Patel', 1, 2022, 3.15),
  (3, 'Olivia', 'Nguyen', 2, 2021, 3.94),
  (4, 'Noah', 'Schmidt', 3, 2020, 2.88),
  (5, 'Ava', 'Rossi', 4, 2022, 3.41),
  (6, 'Ethan', 'Kim', 1, 2020, 2.67),
  (7, 'Sophia', 'Dubois', 5, 2021, 3.56),
  (8, 'Mason', 'Oliveira', 6, 2023, 3.02),
  (9, 'Isabella', 'Horvath', 2, 2022, 3.71),
  (10, 'Lucas', 'Brown', 5, 2020, 2.95),
  (11, 'Mia', 'Andersen', 6, 2021, 3.88),
  (12, 'James', 'Murphy', 3, 2023, 3.33),
  (13, 'Amelia', 'Costa', 1, 2023, 3.67),
  (14, 'Benjamin', 'Walsh', 7, 2022, 3.12),
  (15, 'Harper', 'Yilmaz', 8, 2021, 3.49),
  (16, 'Elijah', 'Fischer', 1, 2021, 3.25),
  (17, 'Charlotte', 'Novak', 2, 2020, 3.6),
  (18, 'Henry', 'Ward', 4, 2021, 2.74),
  (19, 'Evelyn', 'Sato', 8, 2022, 3.97),
  (20, 'Jack', 'Lopez', 5, 2023, 2.81),
  (21, 'Chloe', 'Bakker', 3, 2022, 3.18),
  (22, 'Owen', 'Price', 6, 2020, 3.05),
  (23, 'Zoe', 'Ivanova', 9, 2021, 3.77),
  (24, 'Leo', 'Chen', 1, 2022, 3.44);

INSERT INTO enrollment (enrollment_id, student_id, course_id, instructor_id, semester, score, letter_grade) VALUES
  (1, 1, 1, 1, 'Fall 2022', 94, 'A'),
  (2, 1, 2, 2, 'Spring 2023', 91, 'A'),
  (3, 1, 3, 13, 'Fall 2023', 88, 'B'),
  (4, 1, 5, 3, 'Fall 2022', 85, 'B'),
  (5, 2, 1, 1, 'Fall 2022', 78, 'C'),
  (6, 2, 5, 4, 'Fall 2022', 72, 'C'),
  (7, 2, 2, 2, 'Spring 2023', 81, 'B'),
  (8, 3, 5, 3, 'Fall 2022', 98, 'A'),
  (9, 3, 6, 3, 'Spring 2023', 96, 'A'),
  (10, 3, 7, 4, 'Fall 2023', 93, 'A'),
  (11, 3, 1, 13, 'Fall 2023', 90, 'A'),
  (12, 4, 8, 5, 'Fall 2022', 67, 'D'),
  (13, 4, 9, 11, 'Spring 2023', 74, 'C'),
  (14, 4, 5, 4, 'Fall 2022', 58, 'F'),
  (15, 5, 10, 6, 'Fall 2022', 89, 'B'),
  (16, 5, 14, 9, 'Spring 2023', 84, 'B'),
  (17, 6, 1, 1, 'Fall 2022', 65, 'D'),
  (18, 6, 2, 13, 'Spring 2023', 71, 'C'),
  (19, 6, 3, 13, 'Fall 2023', 69, 'D'),
  (20, 7, 11, 7, 'Fall 2022', 92, 'A'),
  (21, 7, 12, 14, 'Spring 2023', 87, 'B'),
  (22, 7, 6, 3, 'Fall 2023', 83, 'B'),
  (23, 8, 13, 8, 'Fall 2023', 79, 'C'),
  (24, 8, 15, 10, 'Fall 2023', 82, 'B'),
  (25, 9, 6, 3, 'Spring 2023', 95, 'A'),
  (26, 9, 7, 4, 'Fall 2023', 89, 'B'),
  (27, 9, 4, 13, 'Fall 2023', 86, 'B'),
  (28, 10, 11, 7, 'Fall 2022', 73, 'C'),
  (29, 10, 12, 14, 'Spring 2023', 66, 'D'),
  (30, 11, 13, 8, 'Fall 2022', 97, 'A'),
  (31, 11, 15, 10, 'Spring 2023', 90, 'A'),
  (32, 12, 8, 5, 'Fall 2023', 84, 'B'),
  (33, 13, 1, 1, 'Fall 2023', 92, 'A'),
  (34, 13, 5, 4, 'Fall 2023', 80, 'B'),
  (35, 14, 14, 9, 'Fall 2022', 88, 'B'),
  (36, 14, 10, 6, 'Spring 2023', 76, 'C'),
  (37, 15, 15, 10, 'Fall 2022', 85, 'B'),
  (38, 15, 13, 12, 'Spring 2023', 91, 'A'),
  (39, 16, 1, 13, 'Fall 2022', 83, 'B'),
  (40, 16, 2, 2, 'Spring 2023', 77, 'C'),
  (41, 17, 6, 3, 'Fall 2022', 92, 'A'),
  (42, 17, 9, 11, 'Spring 2023', 80, 'B'),
  (43, 19, 15, 10, 'Fall 2022', 99, 'A'),
  (44, 19, 8, 5, 'Spring 2023', 94, 'A'),
  (45, 20, 11, 14, 'Fall 2023', 62, 'D'),
  (46, 21, 8, 11, 'Fall 2022', 86, 'B'),
  (47, 22, 13, 12, 'Fall 2022', 75, 'C'),
  (48, 23, 16, 15, 'Spring 2023', 95, 'A'),
  (49, 23, 14, 9, 'Fall 2023', 90, 'A'),
  (50, 24, 2, 2, 'Fall 2023', 88, 'B'),
  (51, 24, 4, 13, 'Fall 2023', 84, 'B'),
  (52, 12, 5, 3, 'Fall 2023', 77, 'C');
