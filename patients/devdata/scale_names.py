"""Indian first names and surnames for the scale data (issue 7), each list ordered roughly commonest first,
and the weights that give them a realistic skew. Written out in code: nothing is fetched at run time.

The order is a judgement from public surname and baby-name rankings, not a census count: pan-Indian names
first, then each region's common names, then a long tail from every state. First names span Hindu, Muslim,
Christian and Sikh naming in North, South, East, West and the Northeast. Spelling variants that really
occur in registers (Mohammed/Mohammad/Mohd, Choudhary/Chowdhury) are separate entries on purpose: a search
has to cope with them. Every entry is one word of ASCII letters, because the name search assumes
"first last": apostrophes are dropped as registers do (Dsouza), initials and middle names are left out.

Weights are Zipf-Mandelbrot, 1 / (rank + offset) ** exponent. Surnames use exponent 1 with offset 3:
Kumar 4.9 %, Singh 4.0 %, Sharma 3.3 %, Patel 2.8 %, Yadav 2.5 %, the 100th 0.2 %, the last 0.04 %. Plain
Zipf (offset 0) would give one surname 15 % of all patients, more than any surname has in India. First
names are far more varied than surnames, so they are flatter (exponent 0.8, offset 5), drawn half female,
half male: the commonest, Sunita and Rajesh, are 1.25 % of patients each. At 1,000,000 patients that is
about 244,000 distinct full names, the commonest (Rajesh Kumar) borne by about 600. Steeper weights cut
the distinct count only by making a few names absurdly common: plain Zipf 1 on both lists still gives
159,000 distinct full names, but one man in seven is a Rajesh and 11,000 patients are Rajesh Kumar.
"""

from __future__ import annotations

import itertools
from typing import Final, Literal

Gender = Literal["female", "male"]

SURNAME_EXPONENT: Final = 1.0
SURNAME_OFFSET: Final = 3.0
FIRST_NAME_EXPONENT: Final = 0.8
FIRST_NAME_OFFSET: Final = 5.0
FEMALE_SHARE: Final = 0.5


def _words(*lines: str) -> tuple[str, ...]:
    return tuple(itertools.chain.from_iterable(line.split() for line in lines))


FEMALE_FIRST_NAMES: Final = _words(
    # Common across India
    "Sunita Lakshmi Priya Anita Geeta Rekha Pooja Kavita Savita Neha Meena Asha Usha Seema Manju Suman",
    "Radha Sarita Mamta Anjali Rani Kamala Saraswathi Parvati Shanti Sushila Kiran Nisha Deepa Divya Fatima",
    "Jyoti Poonam Preeti Sangeeta Archana Manisha Pushpa Nirmala Shobha Kalpana Rashmi Renu Ritu",
    "Ayesha Mary Shabana Nasreen Rubina Swati Shalini Vandana Sapna Babita Kusum Urmila Saroj Pinki",
    "Padma Lalitha Radhika Sujatha Nandini Chitra Harpreet Manpreet Bhavna Shweta Priyanka Payal Kajal",
    # South
    "Vasanthi Selvi Kala Malathi Valli Revathi Bhuvaneswari Jayalakshmi Vijayalakshmi Mahalakshmi",
    "Dhanalakshmi Sumathi Geetha Kavitha Anitha Sangeetha Shanthi Kalaivani Tamilselvi Muthulakshmi Sridevi",
    "Swapna Hemalatha Padmavathi Durga Sailaja Sirisha Lavanya Manjula Ramya Keerthana Aishwarya Bhavya",
    "Deepika Nithya Sindhu Bindu Ambika Omana Reshma Soumya Anjana Athira Aswathy Gopika Remya Sreeja",
    "Sreelakshmi Annamma Mariamma Leela Jessy Molly Rosamma Celine Sherin Jincy Shiny Beena Shyamala",
    "Kamakshi Meenakshi Vijaya Sarojini Indira Latha Suguna Prema Jaya Rukmini Sharada Girija Uma",
    # East and Northeast
    "Sharmila Mousumi Moumita Rina Sharmistha Tanushree Payel Rupa Mitali Sudeshna Debjani Ankita Puja",
    "Jayashree Sangita Chandana Sabita Basanti Mamata Laxmi Sasmita Subhadra Pratima Gitanjali Namita",
    "Anima Jharna Rupali Bornali Pranita Jonali Dipali Thoibi Lalremruati Sanjukta Susmita Arpita Sumitra",
    "Tapati Krishnaveni Ila Bijaya Manorama Jashoda Kabita Madhabi Rinku Papiya Dolly Sohini Barnali",
    # West
    "Hetal Komal Kokila Hansa Daksha Varsha Sneha Shital Vaishali Ashwini Smita Sonal Nayana Mital",
    "Falguni Jignasha Kinjal Dhara Urvashi Trupti Pranali Madhuri Sayali Mrunal Ujwala Sunanda Shraddha",
    "Rupal Bhumika Nirali Krupa Manjiri Pradnya Rohini Sulochana Vidya Sushma Leena Mangala",
    # North
    "Shakuntala Rinki Sonia Anju Alka Mona Nidhi Shikha Sakshi Khushboo Nikita Ruchi Monika Sonam Aarti",
    "Kanchan Madhu Chanda Champa Bimla Vimla Rajni Rajkumari Sheela Sheetal Kamla Phoolwati",
    "Guddi Omwati Lajwanti Kaushalya Shashi Neelam Suneeta Meenu Reena Tara Mala Sarla Pramila",
    # Sikh
    "Simran Jasleen Harleen Navneet Kulwinder Rajwinder Sukhpreet Amrit Gurleen Parminder Kamaljit",
    "Jasvinder Baljinder Gurmeet Rupinder Mandeep Amandeep Ramandeep Navjot Harjeet",
    # Muslim
    "Shabnam Nazia Sana Sadia Afreen Tabassum Yasmin Mumtaz Rehana Shahnaz Sultana Asma Heena Nargis",
    "Sabiha Khadija Amina Mariyam Noor Razia Zareena Firdaus Gulshan Shirin Kausar Saira Ruksana Rukhsar",
    "Tasleem Najma Farzana Shaheen Salma Zainab Parveen Afsana Shagufta Zubeda Hajra Mehnaz Bushra",
    # Christian
    "Elizabeth Teresa Grace Rosy Susan Anne Maria Agnes Stella Lily Sheeba Priscilla Esther Ruth",
    "Rachel Sarah Margaret Gloria Juliet Daisy Nancy Lucy Philomena Jacintha Lydia Veronica",
    # Young: recent baby-name charts
    "Ananya Aadhya Diya Saanvi Ishita Kavya Meera Shreya Pallavi Aaradhya Anika Myra Pari Navya Avni",
    "Kiara Riya Tanvi Aditi Isha Mahi Siya Prisha Ira Sara Zoya Anaya Amaira Kashvi Vanya Aanya",
)

MALE_FIRST_NAMES: Final = _words(
    # Common across India
    "Rajesh Ramesh Suresh Sanjay Amit Rahul Mohammed Anil Sunil Vijay Manoj Ravi Ashok Mahesh Santosh",
    "Deepak Rakesh Mukesh Dinesh Ajay Vinod Raju Arun Srinivas Venkatesh Prakash Rajendra Vikram Sachin",
    "Rohit Abhishek Vikas Naveen Pradeep Sandeep Ganesh Gopal Raj Satish Manish Nitin Pankaj Alok Anand",
    "Ashish Gaurav Harish Jitendra Kishore Lalit Mohan Narendra Pawan Rajkumar Rajiv Sudhir Subhash",
    "Umesh Yogesh Shankar Mohammad Mohd Imran Joseph Gurpreet Sunny Vivek Prashant Sumit",
    # South
    "Karthik Arvind Balaji Murugan Senthil Saravanan Selvam Kannan Muthu Ramasamy Subramaniam Srinivasan",
    "Raghavan Narayanan Ramakrishna Sridhar Murali Gopinath Harikrishnan Shyam Rajan Babu Prasad Mani",
    "Chandrasekhar Arumugam Palanisamy Velu Ganesan Vignesh Karthikeyan Prabhu Manikandan Sathish Bala",
    "Siva Shiva Sivakumar Senthilkumar Jayakumar Biju Shaji Sajan Rajeev Unnikrishnan Sreejith Jithin",
    "Vishnu Akhil Midhun Abin Jibin Shibu Nagaraju Venkata Ramana Chandra Naresh Rambabu Satyanarayana",
    "Venu Raghu Mallikarjun Anjaneyulu Srikanth Praveen Chaitanya Manjunath Nagaraj Basavaraj",
    "Shivakumar Ravikumar Mallesh Kumaraswamy Lingaraj Puneeth Darshan Madhavan Anbu Elango Kathir",
    # East and Northeast
    "Sourav Saurav Debashis Debasish Partha Sanjib Arindam Abhijit Biswajit Tapas Pranab Anirban Sudip",
    "Soumyajit Indranil Dipankar Amitava Prasenjit Subrata Goutam Sujit Bikash Ranjan Manas Prasanta",
    "Chittaranjan Bijay Sibaram Jagannath Trilochan Bhaskar Hemanta Dhruba Pranjal Nabajit Bhupen",
    "Tomba Ibomcha Temjen Lalrinawma Kiren Swapan Tapan Asit Ashim Uttam Sukumar Nirmal Bapi",
    # West
    "Jignesh Hitesh Bhavesh Mehul Nilesh Paresh Alpesh Chirag Ketan Kalpesh Jayesh Dhaval Hardik Parth",
    "Mitesh Tushar Sagar Swapnil Mangesh Vaibhav Aniket Omkar Pratik Shubham Akshay Tanmay Rupesh",
    "Dattatray Vitthal Balasaheb Sambhaji Savio Agnelo Rosario Dilip Bharat Jagdish Kirit Pravin",
    # North
    "Brijesh Shailendra Rajnish Dharmendra Virendra Surendra Mahendra Devendra Gyanendra Upendra",
    "Yashwant Shiv Shivam Anuj Ankit Ankur Vishal Varun Kunal Karan Aman Mayank Himanshu Nikhil Raghav",
    "Saurabh Siddharth Tarun Ujjwal Vineet Harsh Hemant Kamal Laxman Lakshman Bhupendra Pramod Rampal",
    "Sushil Ravindra Sudhakar Omprakash Shivraj Kailash Kamlesh Mithilesh Awadhesh Munna Ramlal Pappu",
    # Sikh
    "Harpal Jaspreet Navdeep Gurdeep Harjit Jasbir Balwinder Sukhwinder Kuldeep Paramjit Harbhajan",
    "Ranjit Baljit Daljit Sarabjit Lakhwinder Jagjit Manjit Tejinder Jaswant Gurcharan Inderjit",
    # Muslim
    "Irfan Salim Rashid Aslam Arif Asif Javed Farhan Faisal Sameer Shahid Wasim Zubair Abdul Ahmed Iqbal",
    "Nadeem Mustafa Yusuf Ibrahim Ismail Hussain Hasan Khalid Tariq Anwar Akbar Rafiq Shakeel Sohail",
    "Zakir Nasir Junaid Aamir Aftab Rizwan Sajid Shoaib Danish Feroz Mushtaq Mehboob Rahim Karim Jamal",
    "Azhar Altaf Mohsin Imtiyaz Shahnawaz Intezar Mukhtar Sarfaraz",
    # Christian
    "Thomas George John Mathew Paul Peter Anthony Francis Sebastian James Daniel David Samuel Stephen",
    "Robert Michael Jacob Varghese Kurian Abraham Philip Xavier Lawrence Vincent Augustine Simon Benny",
    "Tomy Jose Antony Mathews Cyril Alex Roy Wilson Johnson Edwin",
    # Young: recent baby-name charts
    "Aarav Vivaan Aditya Arjun Sai Reyansh Ayaan Krishna Ishaan Vihaan Rohan Arnav Atharv Kabir Dhruv",
    "Krish Rudra Shaurya Advik Aarush Ayush Yash Dev Veer Rishi Laksh Aryan Pranav Tejas Advait",
)

SURNAMES: Final = _words(
    # The head, pan-Indian: the first 16 each carry 1 % of patients or more
    "Kumar Singh Sharma Patel Yadav Das Reddy Khan Gupta Rao Shaikh Verma Mishra Nair Choudhary Prasad",
    "Pandey Jha Mondal Sahu Shah Ansari Tiwari Thakur Chauhan Naidu Pillai Jain Joshi Mehta Iyer Roy",
    "Ghosh Paul Sarkar Pal Biswas Chatterjee Banerjee Mukherjee Patil Pawar Jadhav Ali Hussain Ahmed",
    "Srivastava Saxena Agarwal Bhatt Desai Rathod Meena Mandal Ram Paswan Mahto Nayak Naik Behera Sinha",
    "Dubey Shukla Tripathi Upadhyay Chaudhary Chowdhury Choudhury Sheikh Qureshi Siddiqui Syed Pathan",
    "Malik Rahman Menon Krishnan Thomas George Joseph Varghese Mathew Gowda Hegde Shetty Bhat Kamath",
    # Pan-regional, somewhat less common
    "Dutta Sen Saha Bose Chakraborty Bhattacharya Kulkarni Deshmukh Shinde More Gaikwad Kale Chavan",
    "Trivedi Pandya Parmar Solanki Rajput Aggarwal Bansal Goel Garg Mittal Singhal Shrivastava Kapoor",
    "Khanna Malhotra Arora Bhatia Sethi Chopra Sood Gill Sandhu Dhillon Grewal Sidhu Brar Mohanty",
    "Mahapatra Mohapatra Patnaik Pattnaik Panda Sahoo Swain Rout Jena Pradhan Tripathy Dash Barik",
    "Subramanian Subramaniam Iyengar Raman Ramachandran Natarajan Srinivasan Narayanan Rajan Murugan",
    "Chowdary Raju Varma Goud Murthy Sastry Setty Reddi Nadar Thevar Gounder Chettiar Mudaliar",
    "Mohammed Mohammad Ahmad Husain Rehman Sayyed Mirza Baig Beg Memon Mansuri Farooqui Naqvi Rizvi",
    "Zaidi Lone Dar Mir Wani Rather",
    # North: Uttar Pradesh, Bihar, Delhi, Haryana, Punjab, Himachal, Uttarakhand, Jammu and Kashmir
    "Dwivedi Chaturvedi Awasthi Bajpai Dixit Tewari Nigam Mathur Bhatnagar Rastogi Maurya Saini Kashyap",
    "Rawat Negi Bisht Rana Tomar Sengar Bhadauria Lodhi Baghel Nishad Kewat Lal Gautam Bharti Prajapati",
    "Vishwakarma Soni Sahni Suri Anand Tandon Talwar Bedi Kohli Chadha Ahuja Bakshi Luthra Khurana",
    "Narang Bhalla Dhawan Mehra Oberoi Puri Sabharwal Walia Sachdeva Gulati Kalra Wadhwa Nagpal Juneja",
    "Chawla Taneja Madan Grover Batra Bhasin Dua Vij Kushwaha Kushwah Chaurasia Manjhi Rai Ray Dhiman",
    "Bajwa Randhawa Sekhon Virk Cheema Aulakh Mann Bhullar Hooda Dahiya Sangwan Ahlawat Phogat",
    "Bhandari Pant Semwal Uniyal Nautiyal Dobhal Guleria Katoch Pathania Dogra Jamwal Manhas Slathia",
    "Kaul Koul Raina Pandita Tickoo Razdan Sapru Ganaie",
    # West: Gujarat, Maharashtra, Goa, Rajasthan
    "Vyas Dave Raval Thakkar Modi Parikh Gandhi Amin Chokshi Doshi Sheth Kothari Dalal Vora Bhavsar",
    "Panchal Makwana Chavda Zala Jadeja Vaghela Gohil Rabari Bharwad Chaudhari Mistry Deshpande Kamble",
    "Sawant Salunkhe Bhosale Mane Wagh Mhatre Phadke Gokhale Apte Karve Ranade Bapat Sathe Kadam",
    "Lokhande Sonawane Thorat Shelke Kharat Ingle Wankhede Bhagat Nikam Ghorpade Mohite Nimbalkar Shirke",
    "Rathore Shekhawat Maheshwari Bishnoi Bhati Purohit Gehlot Sisodia Mali Jat Gurjar Dhakad Patidar",
    "Fernandes Fernandez Dsouza Dcosta Dmello Pereira Rodrigues Gomes Lobo Pinto Menezes Noronha",
    "Coutinho Rebello Sequeira Mascarenhas Saldanha Cardoso Almeida Braganza Colaco Fonseca Dias Rego",
    "Kamat Prabhu Sardesai Dessai Gaonkar Parab Shirodkar Kerkar Borkar",
    # South: Tamil Nadu, Kerala, Karnataka, Andhra Pradesh, Telangana
    "Venkataraman Balasubramanian Sundaram Pandian Selvaraj Arumugam Perumal Ramasamy Palanisamy",
    "Kandasamy Muthusamy Velusamy Rajendran Ganesan Shanmugam Annamalai Chidambaram Anbalagan Elangovan",
    "Kumaresan Manickam Jayaraman Thangaraj Sekar Chandran Nambiar Kurup Panicker Warrier Namboothiri",
    "Nambudiri Kaimal Thampi Thampy Unnithan Kurian Jacob Chacko Cherian Eapen Oommen Koshy Mammen Ninan",
    "Koya Abraham Philip Shenoy Pai Poojary Salian Kotian Hiremath Angadi Biradar Pujari Swamy Shastri",
    "Gaddam Kodali Vemula Bandi Kota Kolli Achari Sarma Babu",
    # East: West Bengal, Odisha, Jharkhand, Chhattisgarh
    "Haldar Halder Mitra Ganguly Chakrabarti Basu Ghoshal Sanyal Lahiri Bagchi Dey De Kar Nandi Naskar",
    "Bera Maity Jana Manna Pramanik Adhikari Bhowmik Bhaumik Kundu Majumdar Mazumdar Hazra Mallick",
    "Mallik Majhi Bhuyan Soren Hembram Murmu Tudu Hansda Kisku Marandi Besra Oraon Munda Toppo Ekka",
    "Minz Kujur Lakra Tirkey Xaxa Barla Kerketta Kullu Dewangan Netam Markam Dhurve Uikey Kanwar",
    # Northeast: Assam, Meghalaya, Mizoram, Nagaland, Manipur, Sikkim, Tripura
    "Bora Borah Baruah Barua Gogoi Saikia Kalita Deka Hazarika Phukan Talukdar Medhi Nath Rabha Boro",
    "Sangma Marak Lyngdoh Kharkongor Syiem Sailo Ralte Khiangte Hmar Ao Sema Meitei Tamang Gurung",
    "Lepcha Bhutia Sherpa Chettri Chhetri Thapa Subba Limbu Debbarma Jamatia",
)


def _zipf_cumulative(count: int, *, exponent: float, offset: float, total: float) -> list[float]:
    """Cumulative weights of ranks 1..count, 1 / (rank + offset) ** exponent, scaled to sum to `total`."""
    weights = [1 / (rank + offset) ** exponent for rank in range(1, count + 1)]
    scale = total / sum(weights)
    return list(itertools.accumulate(w * scale for w in weights))


# For rng.choices(FIRST_NAMES, cum_weights=FIRST_NAME_CUM_WEIGHTS): one draw gives a name and its gender.
FIRST_NAMES: Final[tuple[tuple[str, Gender], ...]] = tuple(
    [(name, "female") for name in FEMALE_FIRST_NAMES] + [(name, "male") for name in MALE_FIRST_NAMES]
)
FIRST_NAME_CUM_WEIGHTS: Final = [
    *_zipf_cumulative(len(FEMALE_FIRST_NAMES), exponent=FIRST_NAME_EXPONENT, offset=FIRST_NAME_OFFSET,
                      total=FEMALE_SHARE),
    *(FEMALE_SHARE + w for w in _zipf_cumulative(len(MALE_FIRST_NAMES), exponent=FIRST_NAME_EXPONENT,
                                                   offset=FIRST_NAME_OFFSET, total=1 - FEMALE_SHARE)),
]  # fmt: skip
SURNAME_CUM_WEIGHTS: Final = _zipf_cumulative(
    len(SURNAMES), exponent=SURNAME_EXPONENT, offset=SURNAME_OFFSET, total=1.0
)
